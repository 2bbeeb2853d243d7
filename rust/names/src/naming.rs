//! Tool-name sanitisation and the multi-tenant `user_{userId}_tool_{toolName}` encoding.
//!
//! Names exposed to a model must match `^[a-zA-Z0-9_-]{1,64}$` (the OpenAI and Anthropic rule).
//! AI4J cuts to 64 and *then* adds `tool_`, so its names reach 69 characters; here we sanitise,
//! prefix, then cap, and mark every cut with a short stable hash of the raw input so that two
//! long names sharing a prefix stay distinct.

use sha2::{Digest, Sha256};

/// The longest name a provider accepts (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME_LEN: usize = 64;
const HASH_LEN: usize = 8;
const USER_PREFIX: &str = "user_";
const USER_TOOL_SEP: &str = "_tool_";
const MAX_USER_ID_LEN: usize = 64;

/// Eight hex characters of SHA-256 over `parts` joined: stable across runs, platforms, versions.
fn hash_hex(parts: &[&str], out: &mut String) {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
    }
    toolroute_digest::push_hex(&hasher.finalize()[..HASH_LEN / 2], out);
}

fn is_allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Append `raw` cleaned: illegal characters become `_`, runs of `_` collapse, no leading `_`.
/// Works on bytes: every byte of a multi-byte character is illegal, and the run they make
/// collapses to a single `_`, exactly as one `_` per character would.
fn clean_into(raw: &str, out: &mut String) {
    let mut bytes = std::mem::take(out).into_bytes();
    for &b in raw.as_bytes() {
        let b = if b.is_ascii_alphanumeric() || b == b'-' {
            b
        } else {
            b'_'
        };
        if b == b'_' && bytes.last().is_none_or(|&last| last == b'_') {
            continue;
        }
        bytes.push(b);
    }
    // Only ASCII was pushed, so this never fails; the fallback keeps it panic-free regardless.
    *out = String::from_utf8(bytes).unwrap_or_default();
}

fn trim_trailing_underscores(out: &mut String) {
    while out.ends_with('_') {
        out.pop();
    }
}

/// Replace illegal characters with `_`, collapse runs of `_`, trim `_` at both ends.
fn clean(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    clean_into(raw, &mut out);
    trim_trailing_underscores(&mut out);
    out
}

/// Cut `name` so that `name + "_" + hash(raw parts)` fits in 64 bytes (on a char boundary).
fn cut_with_hash(name: &mut String, raw: &[&str]) {
    let mut keep = (MAX_NAME_LEN - HASH_LEN - 1).min(name.len());
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    name.truncate(keep);
    trim_trailing_underscores(name);
    name.push('_');
    hash_hex(raw, name);
}

/// `name` cut to [`MAX_NAME_LEN`] with a short hash of `raw` when it is too long (two long names
/// sharing a prefix stay distinct).
pub fn with_hash_suffix(name: &str, raw: &str) -> String {
    let mut out: String = name.chars().take(MAX_NAME_LEN).collect();
    cut_with_hash(&mut out, &[raw]);
    out
}

/// Prefix `tool_` unless it starts with a letter, then cap at 64 (hashing what was cut).
fn finish(mut name: String, raw: &[&str]) -> String {
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert_str(0, "tool_");
        trim_trailing_underscores(&mut name);
    }
    if name.len() > MAX_NAME_LEN {
        cut_with_hash(&mut name, raw);
    }
    name
}

/// Sanitise one raw name into a legal tool name (at most 64 characters, starts with a letter).
pub fn sanitize(raw: &str) -> String {
    finish(clean(raw), &[raw])
}

/// The spec's `generateApiFunctionName(serviceName, toolName)`, without AI4J's 69-character bug.
/// Equal to `sanitize(service + "_" + tool)`, without building the joined string.
pub fn generate_api_function_name(service: &str, tool: &str) -> String {
    let mut name = String::with_capacity(service.len() + tool.len() + 1);
    clean_into(service, &mut name);
    clean_into("_", &mut name);
    clean_into(tool, &mut name);
    trim_trailing_underscores(&mut name);
    finish(name, &[service, "_", tool])
}

/// True when `name` is a legal exposed tool name.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && name.chars().all(is_allowed)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// Why a user id was refused (the message states [`USER_ID_RULE`]).
pub enum UserIdError {
    #[error("user id must not be empty; {USER_ID_RULE}")]
    /// The id is empty.
    Empty,
    #[error("user id is {0} bytes long; {USER_ID_RULE}")]
    /// The id is longer than allowed (its length in bytes).
    TooLong(usize),
    #[error("user id {0:?} contains {1:?}; {USER_ID_RULE}")]
    /// The id has a character outside the rule (the id, the character).
    BadChar(String, char),
}

/// The rule every user id must follow, as error messages state it.
pub const USER_ID_RULE: &str =
    "a user id is 1 to 64 ASCII letters, digits, '_' or '-' ([A-Za-z0-9_-]{1,64})";

/// User ids are restricted to a safe alphabet so that an encoded name is a legal tool name.
pub fn validate_user_id(user_id: &str) -> Result<(), UserIdError> {
    if user_id.is_empty() {
        return Err(UserIdError::Empty);
    }
    if user_id.len() > MAX_USER_ID_LEN {
        return Err(UserIdError::TooLong(user_id.len()));
    }
    if let Some(c) = user_id.chars().find(|c| !is_allowed(*c)) {
        return Err(UserIdError::BadChar(user_id.to_string(), c));
    }
    Ok(())
}

/// How many hex characters of SHA-256 name a (user, tool) pair in the digest form: 96 bits, so
/// finding a second pair for a given name is out of reach (the table also refuses a clash).
const DIGEST_LEN: usize = 24;
/// The digest form's user hint: this many leading characters of the user id.
const DIGEST_USER_HINT: usize = 8;
/// Marks the digest form: no readable user part starts with `-`.
const DIGEST_MARK: char = '-';

/// May `user_{user_id}_tool_{tool}` be used as is? Only when the first `_tool_` after `user_`
/// is the separator (the user id has no `_tool_` and does not end in `_tool`), the user part
/// cannot be mistaken for the digest form (no leading `-`), the tool part is a legal non-empty
/// fragment, and the whole name fits in 64 characters.
fn readable(user_id: &str, tool: &str) -> bool {
    !user_id.starts_with(DIGEST_MARK)
        && !user_id.contains(USER_TOOL_SEP)
        && !user_id.ends_with("_tool")
        && !tool.is_empty()
        && tool.chars().all(is_allowed)
        && USER_PREFIX.len() + user_id.len() + USER_TOOL_SEP.len() + tool.len() <= MAX_NAME_LEN
}

/// SHA-256 over the length-framed pair (so `("ab", "c")` and `("a", "bc")` differ), in hex.
fn pair_digest(user_id: &str, tool: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update((user_id.len() as u64).to_le_bytes());
    hasher.update(user_id.as_bytes());
    hasher.update(tool.as_bytes());
    let mut out = String::with_capacity(DIGEST_LEN);
    toolroute_digest::push_hex(&hasher.finalize()[..DIGEST_LEN / 2], &mut out);
    out
}

/// The exposed name of `tool` of user `user_id`, one-to-one over every valid user id and tool:
///
/// * readable form `user_{userId}_tool_{tool}` when [`readable`] holds (the common case);
/// * otherwise the digest form `user_-{hint}_tool_{toolHint}-{digest}`: `hint` is the user id's
///   first 8 characters with `_` as `-`, `toolHint` the sanitised tool name cut to fit, and
///   `digest` 24 hex characters of SHA-256 over the pair, which alone identifies it.
///
/// The forms cannot meet: a readable name never has `-` right after `user_`, a digest name
/// always has. Two readable names are equal only for equal pairs (the first `_tool_` splits
/// them), two digest names only for equal digests.
pub fn encode_user_tool(user_id: &str, tool: &str) -> Result<String, UserIdError> {
    validate_user_id(user_id)?;
    if readable(user_id, tool) {
        return Ok(format!("{USER_PREFIX}{user_id}{USER_TOOL_SEP}{tool}"));
    }
    let hint: String = user_id
        .chars()
        .take(DIGEST_USER_HINT)
        .map(|c| if c == '_' { '-' } else { c })
        .collect();
    let mut name = format!("{USER_PREFIX}{DIGEST_MARK}{hint}{USER_TOOL_SEP}");
    let room = MAX_NAME_LEN - name.len() - 1 - DIGEST_LEN;
    let mut tool_hint = clean(tool);
    tool_hint.truncate(room); // `clean` leaves only ASCII, so any cut is a char boundary
    trim_trailing_underscores(&mut tool_hint);
    name.push_str(&tool_hint);
    name.push(DIGEST_MARK);
    name.push_str(&pair_digest(user_id, tool));
    Ok(name)
}

/// What a user-form name says about its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserForm<'a> {
    /// The readable form: exactly this (user id, tool).
    Readable {
        /// The owner.
        user_id: &'a str,
        /// The tool's name on the user's server.
        tool: &'a str,
    },
    /// The digest form: the pair is known only to the table.
    Digest {
        /// A prefix of the owner's id, which narrows whose it can be.
        user_hint: &'a str,
    },
}

/// Does `name` have the user form? Such a name never falls back to local or global tools.
pub fn has_user_form(name: &str) -> bool {
    name.starts_with(USER_PREFIX) && name[USER_PREFIX.len()..].contains(USER_TOOL_SEP)
}

/// Decode a user-form name by the grammar of [`encode_user_tool`]; None when `name` has the
/// user form but no encoding produces it (or has no user form at all).
pub fn decode_user_tool(name: &str) -> Option<UserForm<'_>> {
    if !has_user_form(name) {
        return None;
    }
    let rest = &name[USER_PREFIX.len()..];
    let sep = rest.find(USER_TOOL_SEP)?;
    if let Some(hint) = rest[..sep].strip_prefix(DIGEST_MARK) {
        let digest_ok = name.len() > DIGEST_LEN
            && name[name.len() - DIGEST_LEN..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        return digest_ok.then_some(UserForm::Digest { user_hint: hint });
    }
    let (user_id, tool) = (&rest[..sep], &rest[sep + USER_TOOL_SEP.len()..]);
    (validate_user_id(user_id).is_ok() && readable(user_id, tool))
        .then_some(UserForm::Readable { user_id, tool })
}

/// Could `user_id` own a user-form name carrying this digest-form hint?
pub fn matches_user_hint(user_id: &str, hint: &str) -> bool {
    let mapped = user_id
        .chars()
        .take(DIGEST_USER_HINT)
        .map(|c| if c == '_' { '-' } else { c });
    mapped.eq(hint.chars())
}

const USER_SERVICE_SEP: &str = "_service_";

/// `user_{userId}_service_{serviceId}`, the AI4J key of a user's own server (spec 5.1).
pub fn user_service_key(user_id: &str, service_id: &str) -> Result<String, UserIdError> {
    validate_user_id(user_id)?;
    Ok(format!(
        "{USER_PREFIX}{user_id}{USER_SERVICE_SEP}{service_id}"
    ))
}

/// Every (user id, service id) split of a `user_{userId}_service_{serviceId}` key with a valid
/// user id; more than one when a user id itself contains `_service_`, so a caller matches the
/// splits against what is registered (or passes the user id, which leaves one split).
pub fn user_service_candidates<'a>(key: &'a str, user_id: Option<&str>) -> Vec<(&'a str, &'a str)> {
    let Some(rest) = key.strip_prefix(USER_PREFIX) else {
        return Vec::new();
    };
    rest.match_indices(USER_SERVICE_SEP)
        .map(|(i, _)| (&rest[..i], &rest[i + USER_SERVICE_SEP.len()..]))
        .filter(|(uid, sid)| !sid.is_empty() && validate_user_id(uid).is_ok())
        .filter(|(uid, _)| user_id.is_none_or(|u| u == *uid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_legal_names() {
        assert_eq!(
            generate_api_function_name("github", "create_issue"),
            "github_create_issue"
        );
        assert_eq!(
            generate_api_function_name("my-svc", "do-it"),
            "my-svc_do-it"
        );
    }

    #[test]
    fn replaces_collapses_and_trims() {
        assert_eq!(generate_api_function_name("a.b c", "x//y"), "a_b_c_x_y");
        assert_eq!(generate_api_function_name("__svc__", "__t__"), "svc_t");
        assert_eq!(sanitize("héllo wörld"), "h_llo_w_rld");
    }

    #[test]
    fn prefixes_when_not_starting_with_a_letter() {
        assert_eq!(generate_api_function_name("123svc", "x"), "tool_123svc_x");
        assert_eq!(sanitize("-dash"), "tool_-dash");
        assert_eq!(sanitize(""), "tool");
        assert_eq!(sanitize("!!!"), "tool");
    }

    #[test]
    fn never_exceeds_64_even_with_prefix() {
        let long = "9".repeat(80);
        let name = generate_api_function_name(&long, "tool");
        assert_eq!(name.len(), 64);
        assert!(name.starts_with("tool_999"));
        assert!(is_valid_tool_name(&name));
    }

    #[test]
    fn long_names_sharing_a_prefix_stay_distinct_and_stable() {
        let a = generate_api_function_name(&"s".repeat(70), "alpha");
        let b = generate_api_function_name(&"s".repeat(70), "beta");
        assert_ne!(a, b);
        assert_eq!(a, generate_api_function_name(&"s".repeat(70), "alpha"));
        assert!(a.len() <= 64 && b.len() <= 64);
    }

    #[test]
    fn pair_form_equals_joined_sanitize() {
        for (s, t) in [
            ("a", "b"),
            ("_", "_"),
            ("", ""),
            ("x_", "_y"),
            ("1", "2"),
            (&*"q".repeat(70), "z"),
        ] {
            assert_eq!(
                generate_api_function_name(s, t),
                sanitize(&format!("{s}_{t}")),
                "{s:?} {t:?}"
            );
        }
    }

    #[test]
    fn hash_suffix_cuts_on_char_boundaries() {
        let name = with_hash_suffix(&"\u{80}".repeat(40), "");
        let mut empty_hash = String::new();
        hash_hex(&[""], &mut empty_hash);
        assert!(name.len() <= 64 && name.ends_with(&empty_hash));
    }

    #[test]
    fn exactly_64_is_not_cut() {
        let raw = "a".repeat(64);
        assert_eq!(sanitize(&raw), raw);
    }

    #[test]
    fn user_ids_are_validated() {
        assert!(validate_user_id("alice-01_x").is_ok());
        assert_eq!(validate_user_id(""), Err(UserIdError::Empty));
        assert!(matches!(
            validate_user_id("a b"),
            Err(UserIdError::BadChar(_, ' '))
        ));
        assert!(matches!(
            validate_user_id(&"u".repeat(65)),
            Err(UserIdError::TooLong(65))
        ));
    }

    #[test]
    fn user_encoding_is_readable_in_the_common_case() {
        let name = encode_user_tool("123", "create_issue").unwrap();
        assert_eq!(name, "user_123_tool_create_issue");
        assert_eq!(
            decode_user_tool(&name),
            Some(UserForm::Readable {
                user_id: "123",
                tool: "create_issue"
            })
        );
        let uuid = "3f2a1b9c-0d4e-4f5a-8b6c-7d8e9f0a1b2c";
        assert_eq!(
            encode_user_tool(uuid, "create_pr").unwrap(),
            format!("user_{uuid}_tool_create_pr")
        );
    }

    #[test]
    fn ambiguous_pairs_get_distinct_names() {
        let a = encode_user_tool("a_tool_b", "c").unwrap();
        let b = encode_user_tool("a", "b_tool_c").unwrap();
        assert_ne!(a, b);
        assert_eq!(b, "user_a_tool_b_tool_c");
        assert!(a.starts_with("user_-a-tool-b_tool_c-"), "{a}");
        assert!(matches!(
            decode_user_tool(&a),
            Some(UserForm::Digest { .. })
        ));
        let c = encode_user_tool("a_tool", "x").unwrap();
        assert_ne!(c, encode_user_tool("a", "tool_x").unwrap());
    }

    #[test]
    fn long_user_ids_keep_the_form_and_fit() {
        let uid = "f".repeat(64);
        for tool in ["x", "create_issue", &"t".repeat(100)] {
            let name = encode_user_tool(&uid, tool).unwrap();
            assert!(name.len() <= 64 && is_valid_tool_name(&name), "{name}");
            assert!(has_user_form(&name));
            assert!(
                matches!(decode_user_tool(&name), Some(UserForm::Digest { user_hint }) if matches_user_hint(&uid, user_hint))
            );
        }
    }

    #[test]
    fn user_service_keys_split_every_way() {
        assert_eq!(user_service_key("7", "gh").unwrap(), "user_7_service_gh");
        assert_eq!(
            user_service_candidates("user_7_service_gh", None),
            vec![("7", "gh")]
        );
        let key = user_service_key("a_service_b", "c").unwrap();
        assert_eq!(
            user_service_candidates(&key, None),
            vec![("a", "b_service_c"), ("a_service_b", "c")]
        );
        assert_eq!(
            user_service_candidates(&key, Some("a_service_b")),
            vec![("a_service_b", "c")]
        );
    }

    #[test]
    fn user_form_detection() {
        assert!(has_user_form("user_1_tool_x"));
        assert!(!has_user_form("user_tool"));
        assert!(!has_user_form("xuser_1_tool_x"));
        assert_eq!(decode_user_tool("user__tool_x"), None);
    }
}

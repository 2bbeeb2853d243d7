//! Tool-name sanitisation and the multi-tenant `user_{userId}_tool_{toolName}` encoding.
//!
//! Names exposed to a model must match `^[a-zA-Z0-9_-]{1,64}$` (the OpenAI and Anthropic rule).
//! AI4J cuts to 64 and *then* adds `tool_`, so its names reach 69 characters; here we sanitise,
//! prefix, then cap, and mark every cut with a short stable hash of the raw input so that two
//! long names sharing a prefix stay distinct.

use sha2::{Digest, Sha256};

pub const MAX_NAME_LEN: usize = 64;
const HASH_LEN: usize = 8;
const USER_PREFIX: &str = "user_";
const USER_TOOL_SEP: &str = "_tool_";
const MAX_USER_ID_LEN: usize = 64;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Eight hex characters of SHA-256 over `parts` joined: stable across runs, platforms, versions.
fn hash_hex(parts: &[&str], out: &mut String) {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
    }
    for b in hasher.finalize().iter().take(HASH_LEN / 2) {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 0xf) as usize] as char);
    }
}

pub fn short_hash(raw: &str) -> String {
    let mut out = String::with_capacity(HASH_LEN);
    hash_hex(&[raw], &mut out);
    out
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
pub enum UserIdError {
    #[error("user id must not be empty")]
    Empty,
    #[error("user id is {0} characters long; at most 64 are allowed")]
    TooLong(usize),
    #[error("user id {0:?} contains {1:?}; only ASCII letters, digits, '_' and '-' are allowed")]
    BadChar(String, char),
}

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

/// `user_{userId}_tool_{toolName}`, sanitised (and hashed if long) so the model may call it.
pub fn encode_user_tool(user_id: &str, tool: &str) -> Result<String, UserIdError> {
    validate_user_id(user_id)?;
    let raw = format!("{USER_PREFIX}{user_id}{USER_TOOL_SEP}{tool}");
    let tool_part = clean(tool);
    let mut name = format!("{USER_PREFIX}{user_id}{USER_TOOL_SEP}{tool_part}");
    if name.len() > MAX_NAME_LEN || tool_part.is_empty() {
        cut_with_hash(&mut name, &[&raw]);
    }
    Ok(name)
}

/// Does `name` have the user form? Such a name never falls back to local or global tools.
pub fn has_user_form(name: &str) -> bool {
    name.starts_with(USER_PREFIX) && name[USER_PREFIX.len()..].contains(USER_TOOL_SEP)
}

/// Every (user id, tool) split of a user-form name. Ambiguous when the user id itself contains
/// `_tool_`; the router resolves that by exact lookup of the whole name in its table.
pub fn user_form_candidates(name: &str) -> Vec<(&str, &str)> {
    if !has_user_form(name) {
        return Vec::new();
    }
    let rest = &name[USER_PREFIX.len()..];
    rest.match_indices(USER_TOOL_SEP)
        .map(|(i, _)| (&rest[..i], &rest[i + USER_TOOL_SEP.len()..]))
        .filter(|(uid, tool)| !uid.is_empty() && !tool.is_empty())
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
        assert!(name.len() <= 64 && name.ends_with(&short_hash("")));
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
    fn user_encoding_round_trips_through_candidates() {
        let name = encode_user_tool("123", "create_issue").unwrap();
        assert_eq!(name, "user_123_tool_create_issue");
        assert_eq!(user_form_candidates(&name), vec![("123", "create_issue")]);
    }

    #[test]
    fn ambiguous_user_ids_give_every_split() {
        let name = encode_user_tool("a_tool_b", "c").unwrap();
        assert_eq!(
            user_form_candidates(&name),
            vec![("a", "b_tool_c"), ("a_tool_b", "c")]
        );
    }

    #[test]
    fn long_user_tool_names_are_hashed_to_64() {
        let name = encode_user_tool("u1", &"t".repeat(100)).unwrap();
        assert!(name.len() <= 64 && name.starts_with("user_u1_tool_"));
        assert!(is_valid_tool_name(&name));
    }

    #[test]
    fn user_form_detection() {
        assert!(has_user_form("user_1_tool_x"));
        assert!(!has_user_form("user_tool"));
        assert!(!has_user_form("xuser_1_tool_x"));
        assert!(user_form_candidates("user__tool_x").is_empty());
    }
}

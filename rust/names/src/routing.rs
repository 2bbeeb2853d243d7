//! The routing table, toolroute's one registry of exposed names: name -> kind and target, with the
//! spec's precedence (built-in, user-level remote MCP, local MCP, function tool, global gateway)
//! and the naming plan that keeps every exposed name bound to one tool identity for good.
//!
//! Shared (non-tenant) tools live in one namespace: a name belongs to exactly one tool, whatever
//! its kind, so an upstream server can never take a name a host tool holds. Per-user tools live
//! in one key namespace per user, exposed through the one-to-one `user_{id}_tool_{key}` encoding.
//! Every claim of a name by an identity is permanent for the table's life: a name once exposed
//! never moves to another tool (a newcomer that wants it is renamed, never the incumbent). A
//! user's key claims go with the user ([`RoutingTable::forget_user`], once none of its tools is
//! routed): a server that meets thousands of users keeps nothing of those who left, and a user
//! who comes back has its keys planned afresh, as after a restart.
//!
//! Generic over the target so the logic is tested here without Python.

use rustc_hash::FxHashMap;

use crate::naming::{encode_user_tool, has_user_form, with_hash_suffix, UserIdError};

/// What executes a tool; also its level in the precedence order. (Python's `ToolKind` mirrors
/// it in the binding layer, the only one that speaks PyO3.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The eight coding tools.
    Builtin = 0,
    /// A tool of a user's own remote MCP server (`user_{userId}_tool_{toolName}`).
    UserMcp = 1,
    /// A tool of a local `@mcp_service`.
    LocalMcp = 2,
    /// A `@function_tool`.
    Function = 3,
    /// A tool of a global MCP server, behind the gateway.
    GlobalMcp = 4,
}

impl Kind {
    /// Every kind, in precedence order (the first wins).
    pub const ALL: [Kind; 5] = [
        Kind::Builtin,
        Kind::UserMcp,
        Kind::LocalMcp,
        Kind::Function,
        Kind::GlobalMcp,
    ];

    /// The kind at this precedence level, if there is one.
    pub fn from_index(i: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(i)).copied()
    }

    /// Tools the host itself defines: their names are reserved against every upstream server.
    pub fn is_host(self) -> bool {
        matches!(self, Kind::Builtin | Kind::LocalMcp | Kind::Function)
    }

    /// The words messages use, e.g. `"built-in"`, `"user MCP"`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Builtin => "built-in",
            Kind::UserMcp => "user MCP",
            Kind::LocalMcp => "local MCP",
            Kind::Function => "function",
            Kind::GlobalMcp => "global MCP",
        }
    }

    /// The lower-case key traces, audits and listings use, e.g. `"builtin"`, `"user_mcp"`.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Builtin => "builtin",
            Kind::UserMcp => "user_mcp",
            Kind::LocalMcp => "local_mcp",
            Kind::Function => "function",
            Kind::GlobalMcp => "global_mcp",
        }
    }

    /// The name of Python's `ToolKind` member, e.g. `"BUILTIN"`.
    pub fn constant(self) -> &'static str {
        match self {
            Kind::Builtin => "BUILTIN",
            Kind::UserMcp => "USER_MCP",
            Kind::LocalMcp => "LOCAL_MCP",
            Kind::Function => "FUNCTION",
            Kind::GlobalMcp => "GLOBAL_MCP",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// Why a name could not be registered or looked up.
pub enum RouteError {
    #[error("{0}")]
    /// A bad user id.
    UserId(#[from] UserIdError),
    #[error("{name:?} has the user form user_{{userId}}_tool_{{toolName}}, reserved for per-user MCP tools; register it under another name")]
    /// A shared name in the form reserved for per-user tools.
    ReservedUserForm {
        /// The refused name.
        name: String,
    },
    #[error("{name:?} is the name of a built-in tool, which always wins (spec 6), so this {kind} tool could never be called; register it under another name")]
    /// A name a built-in tool already has.
    BuiltinName {
        /// The refused name.
        name: String,
        /// The kind it was to be registered as.
        kind: &'static str,
    },
    #[error("{name:?} is already taken by the {holder_kind} tool {holder:?}; register it under another name")]
    /// A name another tool has claimed.
    Taken {
        /// The name.
        name: String,
        /// The tool that holds it.
        holder: String,
        /// That tool's kind.
        holder_kind: &'static str,
    },
    #[error("{name:?} is already registered as a {existing} tool")]
    /// The same name registered twice.
    Duplicate {
        /// The name.
        name: String,
        /// The kind it is registered as.
        existing: &'static str,
    },
    #[error("user tool {name:?} is already registered for another (user, tool) pair")]
    /// Two (user, tool) pairs with one encoded name.
    UserCollision {
        /// The encoded name both pairs map to.
        name: String,
    },
    #[error("kind {0} is not a shared tool kind")]
    /// A kind number that is not a shared kind.
    BadKind(u8),
}

/// Permanent name <-> identity claims of one namespace.
#[derive(Default)]
struct Claims {
    holder: FxHashMap<String, (String, Kind)>,
    name_of: FxHashMap<String, String>,
}

impl Claims {
    fn holder(&self, name: &str) -> Option<&(String, Kind)> {
        self.holder.get(name)
    }

    fn free_for(&self, name: &str, identity: &str) -> bool {
        self.holder.get(name).is_none_or(|(id, _)| id == identity)
    }

    fn claim(&mut self, name: &str, identity: &str, kind: Kind) {
        self.holder
            .insert(name.to_string(), (identity.to_string(), kind));
        self.name_of.insert(identity.to_string(), name.to_string());
    }

    /// The naming plan for one batch of newcomers. Each item is an identity with its candidate
    /// names, most readable first. An identity that already holds a name keeps it. Otherwise
    /// the candidates are tried round by round: a candidate is taken only when it is free and
    /// exactly one newcomer of the batch wants it this round (several wanting it all move on, so
    /// no newcomer wins by order); last comes the last candidate with a hash of the identity.
    /// The result depends on the batch as a set and on the names already held, never on order.
    fn plan(
        &mut self,
        kind: Kind,
        items: &[(String, Vec<String>)],
        reserved: impl Fn(&str) -> bool,
    ) -> Vec<Option<String>> {
        let mut out: Vec<Option<String>> = items
            .iter()
            .map(|(id, _)| self.name_of.get(id).cloned())
            .collect();
        let mut pending: Vec<usize> = (0..items.len()).filter(|i| out[*i].is_none()).collect();
        let rounds = items.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
        for round in 0..=rounds {
            if pending.is_empty() {
                break;
            }
            let wanted = |i: usize| -> Option<String> {
                let (id, cands) = &items[i];
                if round < rounds {
                    cands.get(round).cloned()
                } else {
                    let base = cands.last().map_or("tool", String::as_str);
                    Some(with_hash_suffix(base, id))
                }
            };
            let mut groups: FxHashMap<String, Vec<usize>> = FxHashMap::default();
            for &i in &pending {
                if let Some(name) = wanted(i) {
                    groups.entry(name).or_default().push(i);
                }
            }
            for (name, group) in groups {
                let ids: Vec<&str> = group.iter().map(|i| items[*i].0.as_str()).collect();
                let one_identity = ids.iter().all(|id| *id == ids[0]);
                if one_identity && !reserved(&name) && self.free_for(&name, ids[0]) {
                    self.claim(&name, ids[0], kind);
                    for i in group {
                        out[i] = Some(name.clone());
                    }
                }
            }
            pending.retain(|i| out[*i].is_none());
        }
        out
    }
}

struct Route<T> {
    kind: Kind,
    target: T,
}

struct UserRoute<T> {
    user_id: String,
    key: String,
    target: T,
}

/// The routing table: shared names by kind, each user's tools by their encoded name, and the
/// names claimed for life; `T` is what a name routes to.
pub struct RoutingTable<T> {
    shared: FxHashMap<String, Route<T>>,
    /// Keyed by the whole encoded name (the encoding is one-to-one).
    user: FxHashMap<String, UserRoute<T>>,
    names: Claims,
    user_keys: FxHashMap<String, Claims>,
}

impl<T> Default for RoutingTable<T> {
    fn default() -> Self {
        Self {
            shared: FxHashMap::default(),
            user: FxHashMap::default(),
            names: Claims::default(),
            user_keys: FxHashMap::default(),
        }
    }
}

/// What a lookup found.
pub enum Lookup<'a, T> {
    /// The route's kind and target.
    Found(Kind, &'a T),
    /// Nothing matched; `user_form` says the name was confined to the user table.
    Missing {
        /// Whether the name had the user form (and so was looked up only in the user table).
        user_form: bool,
    },
}

impl<T> RoutingTable<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a shared tool under a name its caller chose (built-ins, function tools), or
    /// one the plan gave its identity. The name is claimed for `identity` for good; names in
    /// the user form are refused (they route only to user tools).
    pub fn insert(
        &mut self,
        kind: Kind,
        name: &str,
        identity: &str,
        target: T,
        replace: bool,
    ) -> Result<(), RouteError> {
        if kind == Kind::UserMcp {
            return Err(RouteError::BadKind(kind as u8));
        }
        if has_user_form(name) {
            return Err(RouteError::ReservedUserForm {
                name: name.to_string(),
            });
        }
        if let Some((holder, holder_kind)) = self.names.holder(name) {
            if holder != identity {
                if *holder_kind == Kind::Builtin && kind != Kind::Builtin {
                    return Err(RouteError::BuiltinName {
                        name: name.to_string(),
                        kind: kind.label(),
                    });
                }
                return Err(RouteError::Taken {
                    name: name.to_string(),
                    holder: holder.clone(),
                    holder_kind: holder_kind.label(),
                });
            }
        }
        if !replace && self.shared.contains_key(name) {
            return Err(RouteError::Duplicate {
                name: name.to_string(),
                existing: kind.label(),
            });
        }
        self.names.claim(name, identity, kind);
        self.shared.insert(name.to_string(), Route { kind, target });
        Ok(())
    }

    /// Names for a batch of shared newcomers of `kind` (see [`Claims::plan`]); each name is
    /// claimed for its identity, None when even the hashed form is taken.
    pub fn plan(&mut self, kind: Kind, items: &[(String, Vec<String>)]) -> Vec<Option<String>> {
        self.names.plan(kind, items, has_user_form)
    }

    /// Keys for a batch of `user_id`'s newcomers, planned in that user's own key namespace.
    /// No shared name is reserved there: the exposed name always carries the user prefix
    /// (`user_{userId}_tool_{key}`), so it can never be taken for a host tool, and spec 5 puts
    /// the user level right after the built-ins (which [`Self::resolve`] still answers first).
    pub fn plan_user(
        &mut self,
        user_id: &str,
        items: &[(String, Vec<String>)],
    ) -> Result<Vec<Option<String>>, RouteError> {
        crate::naming::validate_user_id(user_id)?;
        let claims = self.user_keys.entry(user_id.to_string()).or_default();
        Ok(claims.plan(Kind::UserMcp, items, |_| false))
    }

    /// Route a planned key of `user_id` to `target`; returns the exposed name.
    pub fn insert_user(
        &mut self,
        user_id: &str,
        key: &str,
        target: T,
    ) -> Result<String, RouteError> {
        let name = encode_user_tool(user_id, key)?;
        if let Some(existing) = self.user.get(&name) {
            if existing.user_id != user_id || existing.key != key {
                return Err(RouteError::UserCollision { name });
            }
        }
        self.user.insert(
            name.clone(),
            UserRoute {
                user_id: user_id.to_string(),
                key: key.to_string(),
                target,
            },
        );
        Ok(name)
    }

    /// Stop routing a shared name (its claim stays: the name never goes to another tool).
    pub fn remove(&mut self, name: &str) -> Option<T> {
        self.shared.remove(name).map(|r| r.target)
    }

    /// Forget a user's tool, given the user and the tool's key; returns its target.
    pub fn remove_user(&mut self, user_id: &str, key: &str) -> Option<T> {
        let name = encode_user_tool(user_id, key).ok()?;
        match self.user.get(&name) {
            Some(e) if e.user_id == user_id && e.key == key => {
                self.user.remove(&name).map(|e| e.target)
            }
            _ => None,
        }
    }

    /// Forget `user_id`'s key claims, once none of its tools is routed (a removed user). False,
    /// keeping them, while any is.
    pub fn forget_user(&mut self, user_id: &str) -> bool {
        let Some(claims) = self.user_keys.get(user_id) else {
            return true;
        };
        let routed = claims.holder.keys().any(|key| {
            encode_user_tool(user_id, key).is_ok_and(|name| self.user.contains_key(&name))
        });
        if !routed {
            self.user_keys.remove(user_id);
        }
        !routed
    }

    /// The (user id, key) a user-form name stands for, if registered.
    pub fn user_entry(&self, name: &str) -> Option<(&str, &str)> {
        self.user
            .get(name)
            .map(|e| (e.user_id.as_str(), e.key.as_str()))
    }

    /// The identity and kind holding a shared name, routed or not.
    pub fn holder(&self, name: &str) -> Option<(&str, Kind)> {
        self.names.holder(name).map(|(id, k)| (id.as_str(), *k))
    }

    /// Resolve with the spec's precedence. A user-form name is looked up only in the user
    /// table (never falling back); with an explicit user id, a plain name is looked up in that
    /// user's keys after the built-ins and before every other shared tool.
    pub fn resolve(&self, name: &str, user_id: Option<&str>) -> Result<Lookup<'_, T>, RouteError> {
        let shared = self.shared.get(name);
        if let Some(r) = shared.filter(|r| r.kind == Kind::Builtin) {
            return Ok(Lookup::Found(r.kind, &r.target));
        }
        if has_user_form(name) {
            return Ok(match self.user.get(name) {
                Some(e) if user_id.is_none_or(|u| u == e.user_id) => {
                    Lookup::Found(Kind::UserMcp, &e.target)
                }
                _ => Lookup::Missing { user_form: true },
            });
        }
        if let Some(uid) = user_id {
            let encoded = encode_user_tool(uid, name)?;
            if let Some(e) = self.user.get(&encoded) {
                if e.user_id == uid && e.key == name {
                    return Ok(Lookup::Found(Kind::UserMcp, &e.target));
                }
            }
        }
        Ok(match shared {
            Some(r) => Lookup::Found(r.kind, &r.target),
            None => Lookup::Missing { user_form: false },
        })
    }

    /// The names routed to tools of `kind`, sorted.
    pub fn names(&self, kind: Kind) -> Vec<String> {
        let mut out: Vec<String> = match kind {
            Kind::UserMcp => self.user.keys().cloned().collect(),
            _ => self
                .shared
                .iter()
                .filter(|(_, r)| r.kind == kind)
                .map(|(k, _)| k.clone())
                .collect(),
        };
        out.sort();
        out
    }

    /// Up to `limit` registered names close to `name`, drawn only from what the caller may see:
    /// shared tools plus the given user's own tools, never another tenant's.
    pub fn suggest(&self, name: &str, user_id: Option<&str>, limit: usize) -> Vec<String> {
        let visible_user = self
            .user
            .iter()
            .filter(|(_, e)| user_id == Some(e.user_id.as_str()))
            .map(|(k, _)| k);
        let mut scored: Vec<(f64, &String)> = self
            .shared
            .keys()
            .chain(visible_user)
            .map(|k| (strsim::jaro_winkler(name, k), k))
            .filter(|(s, _)| *s >= 0.75)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.dedup_by(|a, b| a.1 == b.1);
        scored
            .into_iter()
            .take(limit)
            .map(|(_, k)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found<T: Copy>(l: Lookup<'_, T>) -> Option<(Kind, T)> {
        match l {
            Lookup::Found(k, t) => Some((k, *t)),
            Lookup::Missing { .. } => None,
        }
    }

    fn items(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(id, c)| (id.to_string(), c.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    fn table() -> RoutingTable<u32> {
        let mut t = RoutingTable::new();
        t.insert(Kind::Builtin, "read_file", "b:read_file", 1, false)
            .unwrap();
        t.insert(Kind::LocalMcp, "weather", "l:weather", 3, false)
            .unwrap();
        t.insert(Kind::Function, "calc", "f:calc", 6, false)
            .unwrap();
        t.insert(Kind::GlobalMcp, "search", "g:search", 8, false)
            .unwrap();
        let keys = t
            .plan_user("123", &items(&[("s\0search", &["search"])]))
            .unwrap();
        assert_eq!(keys, vec![Some("search".to_string())]);
        t.insert_user("123", "search", 9).unwrap();
        t
    }

    #[test]
    fn precedence_order() {
        let t = table();
        let at = |n: &str, u: Option<&str>| found(t.resolve(n, u).unwrap());
        assert_eq!(at("read_file", None), Some((Kind::Builtin, 1)));
        assert_eq!(at("weather", None), Some((Kind::LocalMcp, 3)));
        assert_eq!(at("calc", None), Some((Kind::Function, 6)));
        assert_eq!(at("search", None), Some((Kind::GlobalMcp, 8)));
        assert_eq!(at("user_123_tool_search", None), Some((Kind::UserMcp, 9)));
        assert_eq!(at("search", Some("123")), Some((Kind::UserMcp, 9)));
        assert_eq!(at("read_file", Some("123")), Some((Kind::Builtin, 1)));
    }

    #[test]
    fn one_name_one_tool_across_kinds() {
        let mut t = table();
        let err = t.insert(Kind::Function, "read_file", "f:read_file", 0, false);
        assert!(
            matches!(err, Err(RouteError::BuiltinName { .. })),
            "{err:?}"
        );
        let err = t.insert(Kind::GlobalMcp, "calc", "g:calc", 0, true);
        assert!(matches!(err, Err(RouteError::Taken { .. })), "{err:?}");
        // the same identity may replace its own route
        assert!(t.insert(Kind::Function, "calc", "f:calc", 7, true).is_ok());
        assert!(matches!(
            t.insert(Kind::Function, "calc", "f:calc", 7, false),
            Err(RouteError::Duplicate { .. })
        ));
    }

    #[test]
    fn plan_reserves_host_names_and_keeps_incumbents() {
        let mut t = table();
        let got = t.plan(
            Kind::GlobalMcp,
            &items(&[
                ("evil\0read_file", &["read_file", "evil_read_file"]),
                ("evil\0calc", &["calc", "evil_calc"]),
                ("evil\0search", &["search", "evil_search"]),
                ("evil\0fresh", &["fresh", "evil_fresh"]),
            ]),
        );
        let got: Vec<_> = got.into_iter().map(Option::unwrap).collect();
        assert_eq!(got, ["evil_read_file", "evil_calc", "evil_search", "fresh"]);
        // the incumbent of a name keeps it whatever comes later
        let again = t.plan(
            Kind::GlobalMcp,
            &items(&[
                ("other\0fresh", &["fresh", "other_fresh"]),
                ("evil\0fresh", &["x"]),
            ]),
        );
        assert_eq!(
            again,
            vec![Some("other_fresh".into()), Some("fresh".into())]
        );
    }

    #[test]
    fn plan_is_order_independent_within_a_batch() {
        let batch = [
            ("g1\0search", &["search", "g1_search"][..]),
            ("g2\0search", &["search", "g2_search"][..]),
            ("a\0b_c", &["b_c", "a_b_c"][..]),
            ("a_b\0c", &["c", "a_b_c"][..]),
            ("a_b\0b_c", &["b_c", "a_b_b_c"][..]),
        ];
        let mut seen = None;
        for rotation in 0..batch.len() {
            let mut order = batch.to_vec();
            order.rotate_left(rotation);
            let mut t: RoutingTable<u32> = RoutingTable::new();
            let got = t.plan(Kind::GlobalMcp, &items(&order));
            let mut pairs: Vec<(String, String)> = order
                .iter()
                .zip(got)
                .map(|((id, _), n)| (id.to_string(), n.unwrap()))
                .collect();
            pairs.sort();
            let names: std::collections::HashSet<_> = pairs.iter().map(|p| p.1.clone()).collect();
            assert_eq!(names.len(), pairs.len(), "{pairs:?}");
            if let Some(prev) = &seen {
                assert_eq!(prev, &pairs);
            }
            seen = Some(pairs);
        }
    }

    #[test]
    fn user_keys_take_their_own_names_and_yield_to_builtins_only() {
        let mut t = table();
        let batch = [
            ("s\0read_file", &["read_file", "s_read_file"][..]),
            ("s\0weather", &["weather", "s_weather"][..]),
            ("s\0calc", &["calc", "s_calc"][..]),
        ];
        let keys = t.plan_user("7", &items(&batch)).unwrap();
        let keys: Vec<String> = keys.into_iter().map(Option::unwrap).collect();
        assert_eq!(keys, ["read_file", "weather", "calc"]);
        for (i, key) in keys.iter().enumerate() {
            let name = t.insert_user("7", key, 20 + i as u32).unwrap();
            assert_eq!(name, format!("user_7_tool_{key}"));
        }
        // spec 5: built-in, then the user's own, then local MCP, function tool, global MCP
        let at = |n: &str, u: Option<&str>| found(t.resolve(n, u).unwrap());
        assert_eq!(at("read_file", Some("7")), Some((Kind::Builtin, 1)));
        assert_eq!(at("weather", Some("7")), Some((Kind::UserMcp, 21)));
        assert_eq!(at("calc", Some("7")), Some((Kind::UserMcp, 22)));
        assert_eq!(at("user_7_tool_read_file", None), Some((Kind::UserMcp, 20)));
        // nobody else's call reaches them
        assert_eq!(at("weather", None), Some((Kind::LocalMcp, 3)));
        assert_eq!(at("calc", Some("8")), Some((Kind::Function, 6)));
    }

    #[test]
    fn a_users_key_claims_go_with_the_user_and_only_then() {
        let mut t = table();
        // Two tools of one user want the same key: the plan suffixes both, for good.
        let batch = [("a\0x", &["x", "a_x"][..]), ("b\0x", &["x", "b_x"][..])];
        let keys: Vec<String> = t
            .plan_user("7", &items(&batch))
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(keys, ["a_x", "b_x"]);
        t.insert_user("7", "a_x", 1).unwrap();
        t.insert_user("8", "a_x", 2).unwrap(); // another user's route of the same key
                                               // While one of its tools is routed, the user's claims stay.
        assert!(!t.forget_user("7"));
        let again = t
            .plan_user("7", &items(&[("a\0x", &["x", "a_x"][..])]))
            .unwrap();
        assert_eq!(again, [Some("a_x".to_string())]);
        // Once none is, they go: alone now, the tool gets the plain key.
        assert_eq!(t.remove_user("7", "a_x"), Some(1));
        assert!(t.forget_user("7"));
        assert!(!t.user_keys.contains_key("7"));
        let fresh = t
            .plan_user("7", &items(&[("a\0x", &["x", "a_x"][..])]))
            .unwrap();
        assert_eq!(fresh, [Some("x".to_string())]);
        // The other user's route is untouched; an unknown user has nothing to forget.
        assert_eq!(
            found(t.resolve("user_8_tool_a_x", None).unwrap()),
            Some((Kind::UserMcp, 2))
        );
        assert!(t.forget_user("nobody"));
    }

    #[test]
    fn ambiguous_user_ids_resolve_by_exact_entry() {
        let mut t = RoutingTable::new();
        let a = t.insert_user("a_tool_b", "c", 1).unwrap();
        let b = t.insert_user("a", "b_tool_c", 2).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.user_entry(&a), Some(("a_tool_b", "c")));
        assert_eq!(
            found(t.resolve(&a, None).unwrap()),
            Some((Kind::UserMcp, 1))
        );
        assert_eq!(
            found(t.resolve(&b, None).unwrap()),
            Some((Kind::UserMcp, 2))
        );
        assert_eq!(
            found(t.resolve("c", Some("a_tool_b")).unwrap()),
            Some((Kind::UserMcp, 1))
        );
    }

    #[test]
    fn user_form_never_falls_back() {
        let t = table();
        assert!(matches!(
            t.resolve("user_999_tool_search", None).unwrap(),
            Lookup::Missing { user_form: true }
        ));
        assert!(matches!(
            t.resolve("user_123_tool_search", Some("999")).unwrap(),
            Lookup::Missing { user_form: true }
        ));
        assert_eq!(
            found(t.resolve("search", Some("999")).unwrap()),
            Some((Kind::GlobalMcp, 8))
        );
    }

    #[test]
    fn refuses_user_form_for_shared_tools() {
        let mut t = table();
        assert!(matches!(
            t.insert(Kind::Function, "user_1_tool_x", "f:x", 0, false),
            Err(RouteError::ReservedUserForm { .. })
        ));
        assert!(matches!(
            t.insert_user("bad id", "x", 0),
            Err(RouteError::UserId(_))
        ));
    }

    #[test]
    fn suggestions_hide_other_tenants() {
        let mut t = table();
        t.insert_user("777", "secret_search", 10).unwrap();
        let s = t.suggest("serch", None, 3);
        assert!(s.contains(&"search".to_string()));
        let for_other = t.suggest("user_777_tool_secret_serch", Some("123"), 5);
        assert!(
            for_other.iter().all(|n| !n.contains("777")),
            "{for_other:?}"
        );
        let for_owner = t.suggest("user_777_tool_secret_serch", Some("777"), 5);
        assert!(for_owner.contains(&"user_777_tool_secret_search".to_string()));
    }

    #[test]
    fn remove_keeps_the_claim() {
        let mut t = table();
        assert_eq!(t.remove("search"), Some(8));
        assert_eq!(t.names(Kind::GlobalMcp), Vec::<String>::new());
        assert!(matches!(
            t.insert(Kind::GlobalMcp, "search", "other", 1, false),
            Err(RouteError::Taken { .. })
        ));
        assert_eq!(t.remove_user("999", "search"), None);
        assert_eq!(t.remove_user("123", "search"), Some(9));
        assert!(t.names(Kind::UserMcp).is_empty());
    }
}

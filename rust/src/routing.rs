//! The routing table: exposed tool name -> executor kind and target, with the spec's precedence
//! (built-in, user-level remote MCP, local MCP, function tool, global MCP gateway).
//!
//! Generic over the target so the logic is tested here without Python.

use rustc_hash::FxHashMap;

use crate::naming::{encode_user_tool, has_user_form, UserIdError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Builtin = 0,
    UserMcp = 1,
    LocalMcp = 2,
    Function = 3,
    GlobalMcp = 4,
}

impl Kind {
    pub const SHARED: [Kind; 4] = [
        Kind::Builtin,
        Kind::LocalMcp,
        Kind::Function,
        Kind::GlobalMcp,
    ];

    pub fn from_index(i: u8) -> Option<Kind> {
        match i {
            0 => Some(Kind::Builtin),
            1 => Some(Kind::UserMcp),
            2 => Some(Kind::LocalMcp),
            3 => Some(Kind::Function),
            4 => Some(Kind::GlobalMcp),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Builtin => "built-in",
            Kind::UserMcp => "user MCP",
            Kind::LocalMcp => "local MCP",
            Kind::Function => "function",
            Kind::GlobalMcp => "global MCP",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("{0}")]
    UserId(#[from] UserIdError),
    #[error("{name:?} has the user form user_{{userId}}_tool_{{toolName}}, reserved for per-user MCP tools; register it under another name")]
    ReservedUserForm { name: String },
    #[error("{name:?} is already registered as a {existing} tool")]
    Duplicate {
        name: String,
        existing: &'static str,
    },
    #[error("user tool {name:?} is already registered for user {owner:?}")]
    UserCollision { name: String, owner: String },
    #[error("kind {0} is not a shared tool kind")]
    BadKind(u8),
}

struct UserEntry<T> {
    user_id: String,
    tool: String,
    target: T,
}

pub struct RoutingTable<T> {
    shared: [FxHashMap<String, T>; 4],
    /// Keyed by the whole encoded name, so an ambiguous split never matters.
    user: FxHashMap<String, UserEntry<T>>,
}

impl<T> Default for RoutingTable<T> {
    fn default() -> Self {
        Self {
            shared: Default::default(),
            user: FxHashMap::default(),
        }
    }
}

fn slot(kind: Kind) -> Option<usize> {
    Kind::SHARED.iter().position(|k| *k == kind)
}

pub enum Lookup<'a, T> {
    Found(Kind, &'a T),
    /// Nothing matched; `user_form` says the name was confined to the user table.
    Missing {
        user_form: bool,
    },
}

impl<T> RoutingTable<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a shared (non-tenant) tool. Names in the user form are refused: they could
    /// never be reached, since such names route only to user tools.
    pub fn insert(
        &mut self,
        kind: Kind,
        name: &str,
        target: T,
        replace: bool,
    ) -> Result<(), RouteError> {
        let i = slot(kind).ok_or(RouteError::BadKind(kind as u8))?;
        if has_user_form(name) {
            return Err(RouteError::ReservedUserForm {
                name: name.to_string(),
            });
        }
        if !replace && self.shared[i].contains_key(name) {
            return Err(RouteError::Duplicate {
                name: name.to_string(),
                existing: kind.label(),
            });
        }
        self.shared[i].insert(name.to_string(), target);
        Ok(())
    }

    /// Register a per-user tool; returns the exposed `user_{userId}_tool_{toolName}` name.
    pub fn insert_user(
        &mut self,
        user_id: &str,
        tool: &str,
        target: T,
    ) -> Result<String, RouteError> {
        let name = encode_user_tool(user_id, tool)?;
        if let Some(existing) = self.user.get(&name) {
            if existing.user_id != user_id || existing.tool != tool {
                return Err(RouteError::UserCollision {
                    name,
                    owner: existing.user_id.clone(),
                });
            }
        }
        self.user.insert(
            name.clone(),
            UserEntry {
                user_id: user_id.to_string(),
                tool: tool.to_string(),
                target,
            },
        );
        Ok(name)
    }

    pub fn remove(&mut self, kind: Kind, name: &str) -> Option<T> {
        match slot(kind) {
            Some(i) => self.shared[i].remove(name),
            None => self.user.remove(name).map(|e| e.target),
        }
    }

    pub fn remove_user(&mut self, user_id: &str, tool: &str) -> Option<T> {
        let name = encode_user_tool(user_id, tool).ok()?;
        match self.user.get(&name) {
            Some(e) if e.user_id == user_id => self.user.remove(&name).map(|e| e.target),
            _ => None,
        }
    }

    /// The (user id, tool) a user-form name stands for, if registered.
    pub fn user_entry(&self, name: &str) -> Option<(&str, &str)> {
        self.user
            .get(name)
            .map(|e| (e.user_id.as_str(), e.tool.as_str()))
    }

    /// Resolve with the spec's precedence. A user-form name, or any name called with an explicit
    /// user id, is looked up in that user's tools; a user-form name never falls back further.
    pub fn resolve(&self, name: &str, user_id: Option<&str>) -> Result<Lookup<'_, T>, RouteError> {
        if let Some(t) = self.shared[0].get(name) {
            return Ok(Lookup::Found(Kind::Builtin, t));
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
                if e.user_id == uid {
                    return Ok(Lookup::Found(Kind::UserMcp, &e.target));
                }
            }
        }
        for (i, kind) in Kind::SHARED.iter().enumerate().skip(1) {
            if let Some(t) = self.shared[i].get(name) {
                return Ok(Lookup::Found(*kind, t));
            }
        }
        Ok(Lookup::Missing { user_form: false })
    }

    pub fn names(&self, kind: Kind) -> Vec<String> {
        let mut out: Vec<String> = match slot(kind) {
            Some(i) => self.shared[i].keys().cloned().collect(),
            None => self.user.keys().cloned().collect(),
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
            .iter()
            .flat_map(|m| m.keys())
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

    fn table() -> RoutingTable<u32> {
        let mut t = RoutingTable::new();
        t.insert(Kind::Builtin, "read_file", 1, false).unwrap();
        t.insert(Kind::Function, "read_file", 2, false).unwrap();
        t.insert(Kind::LocalMcp, "weather", 3, false).unwrap();
        t.insert(Kind::Function, "weather", 4, false).unwrap();
        t.insert(Kind::GlobalMcp, "weather", 5, false).unwrap();
        t.insert(Kind::Function, "calc", 6, false).unwrap();
        t.insert(Kind::GlobalMcp, "calc", 7, false).unwrap();
        t.insert(Kind::GlobalMcp, "search", 8, false).unwrap();
        t.insert_user("123", "search", 9).unwrap();
        t
    }

    #[test]
    fn precedence_order() {
        let t = table();
        assert_eq!(
            found(t.resolve("read_file", None).unwrap()),
            Some((Kind::Builtin, 1))
        );
        assert_eq!(
            found(t.resolve("weather", None).unwrap()),
            Some((Kind::LocalMcp, 3))
        );
        assert_eq!(
            found(t.resolve("calc", None).unwrap()),
            Some((Kind::Function, 6))
        );
        assert_eq!(
            found(t.resolve("search", None).unwrap()),
            Some((Kind::GlobalMcp, 8))
        );
        assert_eq!(
            found(t.resolve("user_123_tool_search", None).unwrap()),
            Some((Kind::UserMcp, 9))
        );
        assert_eq!(
            found(t.resolve("search", Some("123")).unwrap()),
            Some((Kind::UserMcp, 9))
        );
        assert_eq!(
            found(t.resolve("read_file", Some("123")).unwrap()),
            Some((Kind::Builtin, 1))
        );
    }

    #[test]
    fn user_form_never_falls_back() {
        let t = table();
        assert!(matches!(
            t.resolve("user_999_tool_search", None).unwrap(),
            Lookup::Missing { user_form: true }
        ));
        // the right name but another tenant asking
        assert!(matches!(
            t.resolve("user_123_tool_search", Some("999")).unwrap(),
            Lookup::Missing { user_form: true }
        ));
        // another user with an explicit id falls back to shared tools only, never to user 123
        assert_eq!(
            found(t.resolve("search", Some("999")).unwrap()),
            Some((Kind::GlobalMcp, 8))
        );
    }

    #[test]
    fn ambiguous_user_ids_resolve_by_exact_entry() {
        let mut t = RoutingTable::new();
        let a = t.insert_user("a_tool_b", "c", 1).unwrap();
        assert_eq!(t.user_entry(&a), Some(("a_tool_b", "c")));
        let err = t.insert_user("a", "b_tool_c", 2).unwrap_err();
        assert!(matches!(err, RouteError::UserCollision { .. }));
        assert_eq!(
            found(t.resolve(&a, None).unwrap()),
            Some((Kind::UserMcp, 1))
        );
    }

    #[test]
    fn refuses_user_form_for_shared_tools_and_duplicates() {
        let mut t = table();
        assert!(matches!(
            t.insert(Kind::Function, "user_1_tool_x", 0, false),
            Err(RouteError::ReservedUserForm { .. })
        ));
        assert!(matches!(
            t.insert(Kind::Function, "calc", 0, false),
            Err(RouteError::Duplicate { .. })
        ));
        assert!(t.insert(Kind::Function, "calc", 0, true).is_ok());
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
    fn remove_and_names() {
        let mut t = table();
        assert_eq!(t.remove(Kind::GlobalMcp, "calc"), Some(7));
        assert_eq!(t.names(Kind::GlobalMcp), vec!["search", "weather"]);
        assert_eq!(t.remove_user("999", "search"), None);
        assert_eq!(t.remove_user("123", "search"), Some(9));
        assert!(t.names(Kind::UserMcp).is_empty());
    }
}

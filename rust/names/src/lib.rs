//! Tool names and the routing table: [`naming`] sanitises names, encodes and decodes the per-user
//! form `user_{userId}_tool_{toolName}` and holds the user-id rule; [`routing`] is the table that
//! resolves a called name by the specification's precedence.

pub mod naming;
pub mod routing;

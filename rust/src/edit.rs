//! Exact-string edit application (the `edit` built-in tool).

//! grep and glob on ripgrep's crates, sharing one walker configuration.

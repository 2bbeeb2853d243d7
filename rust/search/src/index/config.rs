//! The index's settings, in one place. Each is read from its `TOOLROUTE_SEARCH_INDEX*` variable
//! when asked (a process may change it between queries), over a default a host may set
//! in-process (`set_default`, reached from Python as `_core.set_search_index_default`: served
//! mode sets its idle timeout this way instead of writing the environment, so an operator's
//! variable still wins). Nothing else in the crate reads these variables.

use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Duration;

use rustc_hash::FxHashMap;

/// The settings a host may give defaults to (by these names).
pub const SETTINGS: &[&str] = &[
    "ttl",
    "max_live",
    "memory",
    "texts",
    "cache_files",
    "cache_bytes",
    "watch",
    "min_scan",
    "daemon",
    "daemon_after",
];

/// Whether queries go to an index daemon (`TOOLROUTE_SEARCH_INDEX_DAEMON`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DaemonUse {
    /// `0`: never.
    Off,
    /// `1`: every query asks one first, and a query that finds none starts one.
    On,
    /// Unset (the default): a query this process has no live index for asks a daemon if one
    /// runs, and a first answer slower than `daemon_after` starts one for the processes after.
    Auto,
}

/// A snapshot of every setting, as this process reads them now.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexConfig {
    /// `TOOLROUTE_SEARCH_INDEX=0` turns the index off.
    pub enabled: bool,
    /// `TOOLROUTE_SEARCH_INDEX_WATCH=0`: no file-system watch (every query checks the tree).
    pub watch: bool,
    /// Unused indexes are dropped after this long (`_TTL`, seconds; default 600).
    pub ttl: Duration,
    /// A scan quicker than this never counts towards starting an index (`_MIN_SCAN`, seconds;
    /// default 0.002): a tree scanned that fast gains nothing from an index, which would hold
    /// two threads and their memory (a served user's one-file workspace, say).
    pub min_scan: Duration,
    /// Live indexes kept at once (`_MAX`, default 64).
    pub max_live: usize,
    /// Bytes all live indexes may hold together (`_MEMORY`, default 1 GiB).
    pub memory: usize,
    /// Bytes of file texts kept from queries (`_TEXTS`, default 256 MiB; 0 keeps none).
    pub texts: usize,
    /// The disk cache's folder (`_CACHE`; `0` or empty: none; default under XDG_CACHE_HOME).
    pub cache: Option<PathBuf>,
    /// Cache files kept at once (`_CACHE_FILES`, default 256).
    pub cache_files: usize,
    /// Bytes the cache files may take (`_CACHE_BYTES`, default 4 GiB).
    pub cache_bytes: u64,
    /// Whether queries go to a daemon (`_DAEMON`: `1`, `0`, unset or `auto`).
    pub daemon: DaemonUse,
    /// With `Auto`, an answer this slow without a daemon starts one (`_DAEMON_AFTER`,
    /// seconds; default 0.05): a tree whose first answer in a new process costs that much.
    pub daemon_after: Duration,
    /// How long a daemon's reply may take (`_DAEMON_TIMEOUT`, seconds; default 60).
    pub daemon_timeout: Duration,
    /// A daemon ends when no query came for this long (`_DAEMON_TTL`, seconds; default 1800).
    pub daemon_ttl: Duration,
}

static DEFAULTS: RwLock<Option<FxHashMap<&'static str, f64>>> = RwLock::new(None);

/// Set the default of `name` (one of [`SETTINGS`]) for this process; its variable still wins.
pub fn set_default(name: &str, value: f64) -> Result<(), String> {
    let Some(&known) = SETTINGS.iter().find(|&&s| s == name) else {
        return Err(format!(
            "no index setting {name:?}; the settings are {}",
            SETTINGS.join(", ")
        ));
    };
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "the index setting {name} must be a finite number >= 0, not {value}"
        ));
    }
    let mut guard = DEFAULTS.write().unwrap_or_else(|e| e.into_inner());
    guard
        .get_or_insert_with(FxHashMap::default)
        .insert(known, value);
    Ok(())
}

fn variable(name: &str) -> Option<String> {
    std::env::var(format!("TOOLROUTE_SEARCH_INDEX{name}")).ok()
}

fn number<T: std::str::FromStr>(suffix: &str) -> Option<T> {
    variable(suffix)?.parse().ok()
}

fn host_default(name: &str) -> Option<f64> {
    DEFAULTS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()?
        .get(name)
        .copied()
}

fn seconds(suffix: &str, setting: &str, fallback: f64) -> Duration {
    let secs = number::<f64>(suffix)
        .or_else(|| host_default(setting))
        .unwrap_or(fallback);
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::from_secs_f64(fallback))
}

fn count(suffix: &str, setting: &str, fallback: f64) -> f64 {
    number::<f64>(suffix)
        .or_else(|| host_default(setting))
        .unwrap_or(fallback)
}

fn daemon_use() -> DaemonUse {
    let host = || match host_default("daemon") {
        Some(0.0) => DaemonUse::Off,
        Some(1.0) => DaemonUse::On,
        _ => DaemonUse::Auto,
    };
    match variable("_DAEMON").as_deref() {
        Some("1") => DaemonUse::On,
        Some("auto") => DaemonUse::Auto,
        None | Some("") => host(),
        Some(_) => DaemonUse::Off,
    }
}

fn cache_folder() -> Option<PathBuf> {
    match std::env::var_os("TOOLROUTE_SEARCH_INDEX_CACHE") {
        Some(v) if v.is_empty() || v == "0" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|c| c.join("toolroute").join("index")),
    }
}

impl IndexConfig {
    /// The settings now: each variable, else the host's default, else the built-in default.
    pub fn current() -> Self {
        let watch = match variable("_WATCH") {
            Some(v) => v != "0",
            None => host_default("watch").is_none_or(|v| v != 0.0),
        };
        Self {
            enabled: variable("").is_none_or(|v| v != "0"),
            watch,
            ttl: seconds("_TTL", "ttl", 600.0),
            min_scan: seconds("_MIN_SCAN", "min_scan", 0.002),
            max_live: Some(count("_MAX", "max_live", 64.0) as usize)
                .filter(|&n| n > 0)
                .unwrap_or(64),
            memory: count("_MEMORY", "memory", (1u64 << 30) as f64) as usize,
            texts: count("_TEXTS", "texts", (256u64 << 20) as f64) as usize,
            cache: cache_folder(),
            cache_files: Some(count("_CACHE_FILES", "cache_files", 256.0) as usize)
                .filter(|&n| n > 0)
                .unwrap_or(256),
            cache_bytes: count("_CACHE_BYTES", "cache_bytes", (4u64 << 30) as f64) as u64,
            daemon: daemon_use(),
            daemon_after: seconds("_DAEMON_AFTER", "daemon_after", 0.05),
            daemon_timeout: seconds("_DAEMON_TIMEOUT", "", 60.0).max(Duration::from_millis(1)),
            daemon_ttl: seconds("_DAEMON_TTL", "", 1800.0),
        }
    }

    /// What a daemon must share with its clients to answer for them (every setting but the
    /// daemon's own), as text to hash into its name. (The daemon is Linux's alone.)
    #[cfg(target_os = "linux")]
    pub(crate) fn shared_by_daemon(&self) -> String {
        let mut shared = self.clone();
        shared.daemon = DaemonUse::Off;
        shared.daemon_after = Duration::ZERO;
        shared.daemon_timeout = Duration::ZERO;
        shared.daemon_ttl = Duration::ZERO;
        format!("{shared:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_default_applies_where_its_variable_is_unset() {
        set_default("cache_files", 7.0).unwrap();
        match std::env::var("TOOLROUTE_SEARCH_INDEX_CACHE_FILES") {
            Err(_) => assert_eq!(IndexConfig::current().cache_files, 7),
            Ok(v) => assert_eq!(IndexConfig::current().cache_files.to_string(), v),
        }
    }

    #[test]
    fn unknown_and_negative_defaults_are_refused() {
        assert!(set_default("nope", 1.0).is_err());
        assert!(set_default("ttl", -1.0).is_err());
        assert!(set_default("ttl", f64::NAN).is_err());
    }
}

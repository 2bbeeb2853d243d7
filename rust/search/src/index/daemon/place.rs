//! Where a daemon listens, and which build it is.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::index::{cache, private};

/// This build of the extension: the loaded library's identity. A client and a daemon of two
/// builds never share a socket name, and a frame from another build is refused.
pub(crate) fn build() -> &'static [u8] {
    static BUILD: OnceLock<Vec<u8>> = OnceLock::new();
    BUILD.get_or_init(|| {
        let mut id = env!("CARGO_PKG_VERSION").as_bytes().to_vec();
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the address and fills `info` with pointers into the
        // loader's own tables, valid while the library stays loaded (for the process).
        let found = unsafe { libc::dladdr(build as *const libc::c_void, &mut info) } != 0;
        if found && !info.dli_fname.is_null() {
            // SAFETY: a loader-owned NUL-terminated string (see above).
            let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
            use std::os::unix::ffi::OsStrExt;
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()));
            if let Ok(st) = rustix::fs::stat(path) {
                for v in [st.st_dev, st.st_ino, st.st_size as u64] {
                    id.extend_from_slice(&v.to_le_bytes());
                }
                id.extend_from_slice(&st.st_mtime.to_le_bytes());
                id.extend_from_slice(&(st.st_mtime_nsec as i64).to_le_bytes());
            }
        }
        id
    })
}

/// Where the daemon for this user, build and environment listens: a socket in the private
/// cache folder, named by a digest of what the index's answers depend on outside the tree
/// (the settings, the cache folder, where git's global excludes are found).
pub(crate) struct Place {
    pub(crate) dir: OwnedFd,
    pub(crate) name: String,
}

impl Place {
    /// The socket's path through the folder's descriptor: short (a socket path holds at most
    /// 107 bytes, a cache folder's path may not) and never re-resolved from the top.
    pub(crate) fn path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!(
            "/proc/self/fd/{}/{}",
            self.dir.as_fd().as_raw_fd(),
            self.name
        ))
    }

    pub(crate) fn lock_name(&self) -> String {
        format!("{}.lock", self.stem())
    }

    /// The daemon's key: a secret a client reads from the private folder and shows with every
    /// request (see `Key`).
    pub(crate) fn key_name(&self) -> String {
        format!("{}.key", self.stem())
    }

    fn stem(&self) -> &str {
        self.name.trim_end_matches(".sock")
    }
}

/// What a client must show: proof that it can read the private cache folder, not merely reach
/// the socket. A command confined by Landlock under the server's own uid can still connect to
/// a socket it may not list or read beside (Landlock does not govern `connect`), and the
/// peer's uid is then ours; the key, in a file only our unconfined processes can read, is what
/// tells the two apart.
pub(crate) type Key = [u8; 32];

/// Equal keys, compared in time independent of where they differ.
pub(crate) fn same_key(shown: &[u8], key: &Key) -> bool {
    shown.len() == key.len() && shown.iter().zip(key).fold(0, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The key of the daemon at `place`: read beneath the folder's descriptor, only from a plain
/// file of ours alone.
pub(crate) fn read_key(place: &Place) -> Option<Key> {
    use std::io::Read;
    let name = place.key_name();
    let fd = rustix::fs::openat(
        &place.dir,
        name.as_str(),
        private::READ,
        rustix::fs::Mode::empty(),
    );
    let fd = fd.ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if !private::private_file(&st) || st.st_size != 32 {
        return None;
    }
    let mut key = [0u8; 32];
    std::fs::File::from(fd).read_exact(&mut key).ok()?;
    Some(key)
}

/// A fresh key, written beside the socket before the socket exists (0600, whole: a client
/// never reads half a key).
pub(crate) fn write_key(place: &Place) -> std::io::Result<Key> {
    let mut key = [0u8; 32];
    let mut filled = 0;
    while filled < key.len() {
        filled +=
            rustix::rand::getrandom(&mut key[filled..], rustix::rand::GetRandomFlags::empty())?;
    }
    private::write_whole(&place.dir, &place.key_name(), &[&key])?;
    Ok(key)
}

/// The name of the daemon for this process's user, build and environment.
pub(crate) fn name() -> String {
    let mut h = Sha256::new();
    h.update(build());
    h.update(rustix::process::geteuid().as_raw().to_le_bytes());
    // The index settings the daemon would answer with, and what finds the files it reads.
    h.update(
        crate::index::config::IndexConfig::current()
            .shared_by_daemon()
            .as_bytes(),
    );
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            let found_by = [
                "HOME",
                "XDG_CACHE_HOME",
                "XDG_CONFIG_HOME",
                "GIT_CONFIG_GLOBAL",
                "GIT_CONFIG_NOSYSTEM",
            ];
            found_by.contains(&k.as_str())
        })
        .collect();
    vars.sort();
    for (k, v) in vars {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    format!("daemon-{}.sock", toolroute_digest::hex(&digest[..12]))
}

/// The daemon's place under `name`, when the cache folder is ours and private (made first
/// when `make`: the daemon's side).
pub(crate) fn place(name: String, make: bool) -> Option<Place> {
    let (_, dir) = cache::private_folder(make)?;
    Some(Place { dir, name })
}

//! The daemon's side: listen on the socket, answer each connection on its own thread from the
//! process's own registry, and end when unused for a while, when asked, or when the socket is
//! no longer ours (removed, or taken over).

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{flock, openat, statat, unlinkat, AtFlags, FlockOperation, Mode, OFlags};

use super::place::{build, place, same_key, write_key, Key, Place};
use super::wire::{self, Op, Reply, Request};
use super::IN_DAEMON;
use crate::grep::Grep;
use crate::index::{self, listing, query, registry};
use crate::walker::Walker;
use toolroute_files::Root;
use toolroute_files::Roots;

/// Connections served at once; more are closed at once (their queries scan).
const MAX_CONNECTIONS: usize = 256;
/// Of those, connections that have not yet shown the key (their first request is not yet
/// answered): a peer that cannot read the key holds at most these, for FIRST_REQUEST each.
const MAX_PENDING: usize = 16;

/// The daemon ends when no query came for this long (`TOOLROUTE_SEARCH_INDEX_DAEMON_TTL`,
/// seconds, default 30 minutes); its indexes are saved to the disk cache as they go.
fn ttl() -> Duration {
    crate::index::config::IndexConfig::current().daemon_ttl
}

struct Shared {
    key: Key,
    last_query: Mutex<Instant>,
    busy: AtomicUsize,
    connections: AtomicUsize,
    pending: AtomicUsize,
    stop: AtomicBool,
}

/// A plain socket name of ours (`daemon-<hex>.sock`), nothing a path could hide in.
fn plain(name: &str) -> bool {
    name.strip_prefix("daemon-")
        .and_then(|n| n.strip_suffix(".sock"))
        .is_some_and(|hex| !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn inode(place: &Place) -> Option<u64> {
    statat(&place.dir, place.name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| st.st_ino)
}

/// Serve under `name` until unused for the TTL, asked to stop, or the socket is no longer ours.
/// `Ok(false)`: another daemon already serves this name.
pub fn serve(name: &str) -> io::Result<bool> {
    IN_DAEMON.store(true, Ordering::Relaxed);
    let refused = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, why.to_string());
    if !plain(name) {
        return Err(refused("not a daemon socket name"));
    }
    let place = place(name.to_string(), true)
        .ok_or_else(|| refused("the cache folder is not ours and private"))?;
    // One daemon per name: the lock is held for the process's life (released by its end).
    let lock = openat(
        &place.dir,
        place.lock_name().as_str(),
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err() {
        return Ok(false);
    }
    // A socket left by a daemon that died: nobody listens there any more.
    let _ = unlinkat(&place.dir, place.name.as_str(), AtFlags::empty());
    let key = write_key(&place)?;
    let listener = UnixListener::bind(place.path())?;
    let ours = inode(&place);
    listener.set_nonblocking(true)?;
    let shared = Arc::new(Shared {
        key,
        last_query: Mutex::new(Instant::now()),
        busy: AtomicUsize::new(0),
        connections: AtomicUsize::new(0),
        pending: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let ttl = ttl();
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 250_000_000,
    };
    let mut checked = Instant::now();
    loop {
        let mut fds = [PollFd::new(&listener, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&tick));
        while let Ok((stream, _)) = listener.accept() {
            accept(stream, &shared);
        }
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let idle = shared
            .last_query
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed();
        if shared.busy.load(Ordering::Relaxed) == 0 && idle > ttl {
            break;
        }
        if checked.elapsed() > Duration::from_secs(1) {
            checked = Instant::now();
            if inode(&place) != ours {
                return Ok(true); // removed or replaced: not ours to remove
            }
        }
    }
    if inode(&place) == ours {
        let _ = unlinkat(&place.dir, place.name.as_str(), AtFlags::empty());
        let _ = unlinkat(&place.dir, place.key_name().as_str(), AtFlags::empty());
    }
    drop(lock);
    Ok(true)
}

fn accept(stream: UnixStream, shared: &Arc<Shared>) {
    let ours = rustix::net::sockopt::socket_peercred(&stream)
        .is_ok_and(|peer| peer.uid == rustix::process::geteuid());
    if !ours || stream.set_nonblocking(false).is_err() {
        return;
    }
    if shared.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
        shared.connections.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    if shared.pending.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
        shared.pending.fetch_sub(1, Ordering::AcqRel);
        shared.connections.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name("toolroute-index-daemon".into())
        .spawn({
            let shared = Arc::clone(&shared);
            move || {
                let mut pending = true;
                connection(&stream, &shared, &mut pending);
                if pending {
                    shared.pending.fetch_sub(1, Ordering::AcqRel);
                }
                shared.connections.fetch_sub(1, Ordering::AcqRel);
            }
        });
    if spawned.is_err() {
        shared.pending.fetch_sub(1, Ordering::AcqRel);
        shared.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How soon a connection's whole first request must have come: a peer that connects and says
/// nothing, or a byte now and then, does not hold one of the connections (and its thread) for
/// long.
const FIRST_REQUEST: Duration = Duration::from_secs(5);

/// Requests and replies in turn, until the client goes (or asks the daemon to stop). A peer
/// refused (without the key, of another build, a frame that could not be read) gets its reply
/// and is let go, and keeps the daemon alive no longer: only answered queries count as use.
/// `pending` is cleared (and the pending count given back) once a request was answered.
fn connection(stream: &UnixStream, shared: &Shared, pending: &mut bool) {
    let mut first = Some(Instant::now() + FIRST_REQUEST);
    while let Ok((body, fd)) = wire::recv_by(stream, wire::MAX_REQUEST, first.take()) {
        shared.busy.fetch_add(1, Ordering::AcqRel);
        let request = wire::decode_request(&body);
        let asked_to_stop = matches!(&request, Some(r) if matches!(r.op, Op::Stop));
        let reply = match request {
            None => Reply::Refused("a malformed request".into()),
            Some(r) => respond(&shared.key, r, fd),
        };
        // `respond` refuses a stop from another build; only the one it agreed to counts.
        let stopping = asked_to_stop && matches!(reply, Reply::Done(true));
        let refused = matches!(reply, Reply::Refused(_));
        if !refused {
            *shared.last_query.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
        shared.busy.fetch_sub(1, Ordering::AcqRel);
        let sent = wire::send(stream, &wire::encode_reply(&reply), None);
        if stopping {
            shared.stop.store(true, Ordering::Relaxed);
        }
        if sent.is_err() || stopping || refused {
            return;
        }
        // Answered: the client showed the key, and may keep the connection idle between its
        // queries.
        if std::mem::take(pending) {
            shared.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn respond(key: &Key, request: Request, fd: Option<OwnedFd>) -> Reply {
    if request.build != build() {
        return Reply::Refused("a client of another build".into());
    }
    if !same_key(&request.key, key) {
        return Reply::Refused("a client without the daemon's key".into());
    }
    if matches!(request.op, Op::Stop) {
        return Reply::Done(true);
    }
    let Some(fd) = fd else {
        return Reply::Refused("no root descriptor came with the request".into());
    };
    // Opened for reading, not for its path alone: the client could read the tree itself.
    let readable = rustix::fs::fcntl_getfl(&fd)
        .is_ok_and(|f| !f.contains(OFlags::PATH) && f & OFlags::ACCMODE != OFlags::WRONLY);
    if !readable {
        return Reply::Refused("the root descriptor was not opened for reading".into());
    }
    // The root is what the descriptor is, where the kernel says it is: a client cannot name
    // a tree it did not open, nor pass one off as another's path.
    let Ok(root) = Root::from_fd(fd) else {
        return Reply::Refused("the root descriptor cannot be resolved".into());
    };
    if root.path() != request.root_path {
        return Reply::Refused("the root descriptor is not at the path given".into());
    }
    let Ok(root_fd) = root.fd().try_clone_to_owned() else {
        return Reply::Refused("the root descriptor cannot be duplicated".into());
    };
    let root_path = root.path().to_path_buf();
    let roots = Roots::of_root(root);
    let walker = match Walker::from_parts(root_fd, root_path, request.walk) {
        Ok(w) => w,
        Err(e) => return Reply::Refused(e.to_string()),
    };
    let Some(key) = index::key_of(&walker) else {
        return Reply::NotReady;
    };
    match request.op {
        Op::Grep { pattern, opts } => {
            let grep = match Grep::new(&pattern, opts) {
                Ok(g) => g,
                Err(e) => return Reply::Refused(e.to_string()),
            };
            let out = index::local(&key, &roots, &walker, |ix| {
                query::grep(ix, &grep, &pattern, &walker)
            });
            out.map_or(Reply::NotReady, Reply::Grep)
        }
        Op::Glob { sort } => {
            index::local(&key, &roots, &walker, |ix| listing::glob(ix, &walker, sort))
                .map_or(Reply::NotReady, Reply::Glob)
        }
        Op::Scanned => {
            // A client's scan is not timed here: it counts, as a daemon is asked for on purpose.
            registry::scanned(&key, &roots, Duration::MAX);
            Reply::Done(true)
        }
        Op::Warm { timeout } => Reply::Done(index::warm_here(&key, &roots, timeout)),
        Op::Stats => Reply::Stats(index::stats_here(&key)),
        Op::Stop => Reply::Done(true),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use rustix::fs::{Mode, OFlags};

    use super::*;
    use crate::grep::GrepOptions;
    use crate::walker::{WalkOptions, WalkParts};

    const KEY: Key = [7; 32];

    fn open(p: &Path) -> OwnedFd {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        rustix::fs::open(p, flags, Mode::empty()).unwrap()
    }

    fn respond(request: Request, fd: Option<OwnedFd>) -> Reply {
        super::respond(&KEY, request, fd)
    }

    fn request(root: &Path, op: Op) -> Request {
        let opts = WalkOptions {
            globs_from_workspace: true,
            ..WalkOptions::default()
        };
        Request {
            build: build().to_vec(),
            key: KEY.to_vec(),
            root_path: root.to_path_buf(),
            walk: WalkParts {
                opts,
                ..WalkParts::default()
            },
            op,
        }
    }

    fn grep(pattern: &str) -> Op {
        Op::Grep {
            pattern: pattern.into(),
            opts: GrepOptions::default(),
        }
    }

    fn texts(reply: &Reply) -> Vec<String> {
        match reply {
            Reply::Grep(out) => out
                .files
                .iter()
                .flat_map(|f| f.rows.iter().flatten().map(|r| r.text.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn a_descriptor_is_never_passed_off_as_another_root() {
        let d = tempfile::tempdir().unwrap();
        for (name, word) in [("a", "alpha"), ("b", "beta")] {
            std::fs::create_dir(d.path().join(name)).unwrap();
            std::fs::write(
                d.path().join(name).join("f.txt"),
                format!("secret {word}\n"),
            )
            .unwrap();
        }
        let a = d.path().join("a").canonicalize().unwrap();
        let b = d.path().join("b").canonicalize().unwrap();
        let warm = Op::Warm {
            timeout: Duration::from_secs(60),
        };
        assert!(matches!(
            respond(request(&a, warm), Some(open(&a))),
            Reply::Done(true)
        ));
        let honest = respond(request(&a, grep("secret")), Some(open(&a)));
        assert_eq!(texts(&honest), ["secret alpha"]);

        // b's descriptor said to be a: refused, nothing of a's index shown.
        let forged = respond(request(&a, grep("secret")), Some(open(&b)));
        assert!(matches!(forged, Reply::Refused(_)));
        // No descriptor, or a frame of another build.
        let bare = respond(request(&a, grep("secret")), None);
        assert!(matches!(bare, Reply::Refused(_)));
        let mut other = request(&a, grep("secret"));
        other.build = b"another build".to_vec();
        assert!(matches!(respond(other, Some(open(&a))), Reply::Refused(_)));
        // A client without the key (one that reached the socket but cannot read the folder
        // it lies in), or with a descriptor opened for its path alone (which Landlock grants
        // for folders it forbids reading).
        for shown in [Vec::new(), vec![0; 32], [KEY.as_slice(), &[7]].concat()] {
            let mut keyless = request(&a, grep("secret"));
            keyless.key = shown;
            assert!(matches!(
                respond(keyless, Some(open(&a))),
                Reply::Refused(_)
            ));
        }
        let mut keyless_stop = request(&a, Op::Stop);
        keyless_stop.key = vec![0; 32];
        assert!(matches!(respond(keyless_stop, None), Reply::Refused(_)));
        let path_only = rustix::fs::open(&a, OFlags::PATH | OFlags::DIRECTORY, Mode::empty());
        let named = respond(request(&a, grep("secret")), Some(path_only.unwrap()));
        assert!(matches!(named, Reply::Refused(_)));
        let mut stop = request(&a, Op::Stop);
        stop.build = b"another build".to_vec();
        assert!(matches!(respond(stop, None), Reply::Refused(_)));
        // A start that leaves the root.
        let mut escape = request(&a, grep("secret"));
        escape.walk.start_rel = "../b".into();
        assert!(matches!(respond(escape, Some(open(&a))), Reply::Refused(_)));

        // a moved away and another folder put at its path: a's index never answers for it,
        // whether or not its watch has seen the move yet.
        std::fs::rename(&a, d.path().join("a-old")).unwrap();
        std::fs::create_dir(&a).unwrap();
        std::fs::write(a.join("f.txt"), "secret gamma\n").unwrap();
        let swapped = respond(request(&a, grep("secret")), Some(open(&a)));
        assert!(!texts(&swapped).iter().any(|t| t.contains("alpha")));
        assert!(matches!(swapped, Reply::NotReady) || texts(&swapped) == ["secret gamma"]);
    }
}

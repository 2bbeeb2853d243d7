//! A process's side: ask the daemon, and start one when there is none. Every failure is an
//! `Unavailable` (the caller scans, or uses its own index), never an error the user sees.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::fs::{openat, Mode, OFlags};

use super::place::{build, name, place, read_key, Key};
pub use super::server::serve;
use super::wire::{self, Op, Reply, Request};
use crate::glob::{GlobOutcome, GlobSort};
use crate::grep::{Grep, GrepOutcome};
use crate::index::config::DaemonUse;
use crate::index::IndexStats;
use crate::walker::Walker;

pub(crate) enum Answer<T> {
    Indexed(T),
    /// The daemon has no ready index for this walk: scan, then say so (`scanned`).
    NotReady,
    Unavailable,
}

/// How to start a daemon (`python -m toolroute.search_daemon`, set by the Python package);
/// the socket's name is added as the last argument.
static COMMAND: Mutex<Option<Vec<OsString>>> = Mutex::new(None);
/// A connection to the daemon, with the key it was made with.
struct Connection {
    stream: UnixStream,
    key: Key,
}

/// Connections kept open between queries (a query takes one, or opens one).
static IDLE: Mutex<Vec<Connection>> = Mutex::new(Vec::new());
const MAX_IDLE: usize = 4;
static LAST_START: Mutex<Option<Instant>> = Mutex::new(None);
/// A process starts a daemon at most this often (it needs a moment to listen).
const START_EVERY: Duration = Duration::from_secs(2);
static ANSWERED: AtomicU64 = AtomicU64::new(0);
/// With `Auto`, no daemon was found until then: queries meanwhile do not look for one (a look
/// reads the settings, hashes them and opens the private folder).
static ABSENT_UNTIL: Mutex<Option<Instant>> = Mutex::new(None);
const ABSENT_FOR: Duration = Duration::from_secs(1);

/// Set how to start a daemon (`argv`; empty: never start one).
pub fn set_command(argv: Vec<OsString>) {
    *COMMAND.lock().unwrap_or_else(|e| e.into_inner()) = (!argv.is_empty()).then_some(argv);
}

/// Queries of this process a daemon answered.
pub fn answered() -> u64 {
    ANSWERED.load(Ordering::Relaxed)
}

/// How long a reply may take (`TOOLROUTE_SEARCH_INDEX_DAEMON_TIMEOUT`, seconds): past it the
/// connection is dropped and the query scans.
fn timeout() -> Duration {
    crate::index::config::IndexConfig::current().daemon_timeout
}

/// Start this environment's daemon (at most every `START_EVERY`; one already listening makes
/// the new one end at once).
pub(crate) fn start() {
    *ABSENT_UNTIL.lock().unwrap_or_else(|e| e.into_inner()) = None;
    launch(&name());
}

fn launch(name: &str) {
    let Some(argv) = COMMAND.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return;
    };
    if crate::index::config::IndexConfig::current().cache.is_none() {
        return; // its socket lives in the cache folder: without one no daemon could listen
    }
    {
        let mut last = LAST_START.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|t| t.elapsed() < START_EVERY) {
            return;
        }
        *last = Some(Instant::now());
    }
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .arg(name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    if let Ok(mut child) = command.spawn() {
        // The entry point detaches at once (the daemon is its child); reap the one started here.
        let _ = std::thread::Builder::new()
            .name("toolroute-index-daemon-start".into())
            .spawn(move || child.wait());
    }
}

/// A connection to this environment's daemon, checked to be of our own user, with the key
/// read beside its socket; with `spawn`, a missing daemon is started (this query goes on
/// without it).
fn connect(spawn: bool) -> Option<Connection> {
    let name = name();
    let Some(place) = place(name.clone(), false) else {
        if spawn {
            launch(&name);
        }
        return None;
    };
    let stream = match UnixStream::connect(place.path()) {
        Ok(stream) => stream,
        Err(e) => {
            let gone = matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            );
            if gone && spawn {
                launch(&name);
            }
            return None;
        }
    };
    let peer = rustix::net::sockopt::socket_peercred(&stream).ok()?;
    if peer.uid != rustix::process::geteuid() {
        return None;
    }
    // Read after connecting: a daemon writes its key before it listens.
    let key = read_key(&place)?;
    let limit = Some(timeout());
    stream.set_read_timeout(limit).ok()?;
    stream.set_write_timeout(limit).ok()?;
    Some(Connection { stream, key })
}

fn exchange(
    connection: &Connection,
    request: &mut Request,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<Reply> {
    request.key = connection.key.to_vec();
    let stream = &connection.stream;
    wire::send(stream, &wire::encode_request(request), fd)?;
    let (reply, extra) = wire::recv(stream, wire::MAX_REPLY)?;
    if extra.is_some() {
        return Err(io::ErrorKind::InvalidData.into());
    }
    wire::decode_reply(&reply).ok_or_else(|| io::ErrorKind::InvalidData.into())
}

fn call(mut request: Request, fd: Option<BorrowedFd<'_>>, spawn: bool) -> Option<Reply> {
    let kept = IDLE.lock().unwrap_or_else(|e| e.into_inner()).pop();
    // A kept connection may belong to a daemon that has ended since: one try on a new one.
    let mut answered = kept.and_then(|c| exchange(&c, &mut request, fd).ok().map(|r| (c, r)));
    if answered.is_none() {
        let c = connect(spawn)?;
        answered = exchange(&c, &mut request, fd).ok().map(|r| (c, r));
    }
    let (connection, reply) = answered?;
    // A daemon that refused (another build, a stale key, a frame it could not read) is not
    // asked again on this connection: the next query connects anew.
    if !matches!(reply, Reply::Refused(_)) {
        let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
    }
    Some(reply)
}

fn request(walker: &Walker, op: Op) -> Request {
    Request {
        build: build().to_vec(),
        key: Vec::new(),
        root_path: walker.root_path().to_path_buf(),
        walk: walker.parts(),
        op,
    }
}

/// `spawn`: a query that finds no daemon may start one, which it does with the setting `1`
/// (with `Auto` only a slow answer starts one: `super::answered_here`).
fn ask(walker: &Walker, op: Op, spawn: bool) -> Option<Reply> {
    let mode = super::mode();
    let spawn = spawn && mode == DaemonUse::On;
    let auto = mode == DaemonUse::Auto;
    if auto {
        let absent = *ABSENT_UNTIL.lock().unwrap_or_else(|e| e.into_inner());
        if absent.is_some_and(|until| Instant::now() < until) {
            return None;
        }
    }
    // The root goes as a descriptor opened for reading, which the daemon requires: proof that
    // this process may read the tree, not only name it (a path-only descriptor can be had for
    // a folder Landlock forbids reading).
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root = openat(walker.root().as_fd(), ".", flags, Mode::empty()).ok()?;
    let reply = call(request(walker, op), Some(root.as_fd()), spawn);
    if auto && reply.is_none() {
        *ABSENT_UNTIL.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + ABSENT_FOR);
    }
    reply
}

pub(crate) fn grep(walker: &Walker, g: &Grep, pattern: &str) -> Answer<GrepOutcome> {
    let op = Op::Grep {
        pattern: pattern.to_string(),
        opts: g.options().clone(),
    };
    match ask(walker, op, true) {
        Some(Reply::Grep(mut out)) => {
            // Files whose rows were not kept are searched again here, beneath our own root.
            out.root = Some(walker.root());
            ANSWERED.fetch_add(1, Ordering::Relaxed);
            Answer::Indexed(out)
        }
        Some(Reply::NotReady) => Answer::NotReady,
        _ => Answer::Unavailable,
    }
}

pub(crate) fn glob(walker: &Walker, sort: GlobSort) -> Answer<GlobOutcome> {
    match ask(walker, Op::Glob { sort }, true) {
        Some(Reply::Glob(out)) => {
            ANSWERED.fetch_add(1, Ordering::Relaxed);
            Answer::Indexed(out)
        }
        Some(Reply::NotReady) => Answer::NotReady,
        _ => Answer::Unavailable,
    }
}

/// This walk was answered by a scan: the daemon counts it towards building its index.
pub(crate) fn scanned(walker: &Walker) {
    let _ = ask(walker, Op::Scanned, false);
}

/// The daemon builds (or restores) the index for this walk and waits; `None`: no daemon.
pub(crate) fn warm(walker: &Walker, timeout: Duration) -> Option<bool> {
    match ask(walker, Op::Warm { timeout }, true)? {
        Reply::Done(ok) => Some(ok),
        _ => None,
    }
}

pub(crate) fn stats(walker: &Walker) -> Option<IndexStats> {
    match ask(walker, Op::Stats, false)? {
        Reply::Stats(s) => Some(s),
        _ => None,
    }
}

/// Ask this environment's daemon to end, and wait (at most 5 s) until its socket is gone;
/// false when none answered.
pub fn stop() -> bool {
    IDLE.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let mut request = Request {
        build: build().to_vec(),
        key: Vec::new(),
        root_path: Default::default(),
        walk: Default::default(),
        op: Op::Stop,
    };
    let Some(connection) = connect(false) else {
        return false;
    };
    if !matches!(
        exchange(&connection, &mut request, None),
        Ok(Reply::Done(true))
    ) {
        return false;
    }
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let gone = place(name(), false).is_none_or(|p| {
            rustix::fs::statat(
                &p.dir,
                p.name.as_str(),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .is_err()
        });
        if gone {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

//! What a client and the index daemon say to each other, as bytes: one request, one reply, each
//! a frame (a little-endian `u32` length, then the body in `snapshot`'s codec). A request that
//! names a walk carries the walk's root as a descriptor (`SCM_RIGHTS`) with its first byte.
//! Decoding checks every count against what is left and refuses any path that is not plain,
//! so a damaged or hostile frame gives `None`, never a panic or a huge allocation.

use std::ffi::OsStr;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, UNIX_EPOCH};

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use super::super::snapshot::{Dec, Enc};
use super::super::IndexStats;
use crate::glob::{GlobHit, GlobOutcome, GlobSort};
use crate::grep::{FileHits, GrepOptions, GrepOutcome, OutputMode, Row, RowKind};
use crate::walker::{WalkOptions, WalkParts};
use crate::SkipStats;

/// Bumped whenever a frame's layout changes.
const PROTOCOL: u32 = 2;
/// A request holds a pattern, globs and types: far below this.
pub(crate) const MAX_REQUEST: usize = 1 << 20;
/// A reply holds at most the rows a search keeps (1 MiB) and every file with a match.
pub(crate) const MAX_REPLY: usize = 256 << 20;

pub(crate) enum Op {
    Grep {
        pattern: String,
        opts: GrepOptions,
    },
    Glob {
        sort: GlobSort,
    },
    /// The client answered by a scan: the daemon counts it towards building the index.
    Scanned,
    Warm {
        timeout: Duration,
    },
    Stats,
    Stop,
}

pub(crate) struct Request {
    /// The client's build: a daemon of another build refuses rather than misread a frame.
    pub(crate) build: Vec<u8>,
    /// The daemon's key, as the client read it (`place::Key`).
    pub(crate) key: Vec<u8>,
    /// Where the client says the root is: the daemon checks it against the descriptor.
    pub(crate) root_path: PathBuf,
    pub(crate) walk: WalkParts,
    pub(crate) op: Op,
}

pub(crate) enum Reply {
    Grep(GrepOutcome),
    Glob(GlobOutcome),
    /// No ready index for this walk: the client scans.
    NotReady,
    Done(bool),
    Stats(IndexStats),
    Refused(String),
}

fn string(d: &mut Dec<'_>) -> Option<String> {
    String::from_utf8(d.bytes()?.to_vec()).ok()
}

fn strings(e: &mut Enc, items: &[String]) {
    e.len(items.len());
    for s in items {
        e.bytes(s.as_bytes());
    }
}

fn read_strings(d: &mut Dec<'_>) -> Option<Vec<String>> {
    let n = d.len(8)?;
    (0..n).map(|_| string(d)).collect()
}

fn opt_u64(e: &mut Enc, v: Option<u64>) {
    e.bool(v.is_some());
    e.u64(v.unwrap_or(0));
}

fn read_opt_u64(d: &mut Dec<'_>) -> Option<Option<u64>> {
    let some = d.bool()?;
    let v = d.u64()?;
    Some(some.then_some(v))
}

fn usize_of(d: &mut Dec<'_>) -> Option<usize> {
    usize::try_from(d.u64()?).ok()
}

fn walk(e: &mut Enc, w: &WalkParts) {
    e.bytes(w.start_rel.as_os_str().as_bytes());
    e.bytes(w.shown_start.as_bytes());
    let o = &w.opts;
    for b in [o.hidden, o.no_ignore, o.require_git, o.globs_from_workspace] {
        e.bool(b);
    }
    e.bool(o.follow_symlinks);
    strings(e, &o.globs);
    strings(e, &o.types);
    e.len(o.threads);
}

fn read_walk(d: &mut Dec<'_>) -> Option<WalkParts> {
    let start_rel = d.rel_path()?;
    let shown_start = string(d)?;
    let (hidden, no_ignore, require_git, globs_from_workspace) =
        (d.bool()?, d.bool()?, d.bool()?, d.bool()?);
    let follow_symlinks = d.bool()?;
    let globs = read_strings(d)?;
    let types = read_strings(d)?;
    let threads = usize_of(d)?;
    Some(WalkParts {
        start_rel,
        shown_start,
        opts: WalkOptions {
            hidden,
            no_ignore,
            require_git,
            globs,
            globs_from_workspace,
            types,
            follow_symlinks,
            threads,
        },
    })
}

fn mode_code(m: OutputMode) -> u8 {
    match m {
        OutputMode::Content => 0,
        OutputMode::FilesWithMatches => 1,
        OutputMode::Count => 2,
    }
}

fn grep_options(e: &mut Enc, o: &GrepOptions) {
    for b in [
        o.case_insensitive,
        o.fixed_strings,
        o.word,
        o.multiline,
        o.text,
    ] {
        e.bool(b);
    }
    e.len(o.before);
    e.len(o.after);
    e.u8(mode_code(o.mode));
    opt_u64(e, o.max_count);
    e.len(o.max_line_bytes);
    e.len(o.store_budget);
}

fn read_grep_options(d: &mut Dec<'_>) -> Option<GrepOptions> {
    let (case_insensitive, fixed_strings, word, multiline, text) =
        (d.bool()?, d.bool()?, d.bool()?, d.bool()?, d.bool()?);
    let (before, after) = (usize_of(d)?, usize_of(d)?);
    let mode = match d.u8()? {
        0 => OutputMode::Content,
        1 => OutputMode::FilesWithMatches,
        2 => OutputMode::Count,
        _ => return None,
    };
    Some(GrepOptions {
        case_insensitive,
        fixed_strings,
        word,
        multiline,
        before,
        after,
        mode,
        max_count: read_opt_u64(d)?,
        text,
        max_line_bytes: usize_of(d)?.max(1),
        store_budget: usize_of(d)?,
    })
}

pub(crate) fn encode_request(r: &Request) -> Vec<u8> {
    let mut e = Enc::default();
    e.u32(PROTOCOL);
    e.bytes(&r.build);
    e.bytes(&r.key);
    let tag = match &r.op {
        Op::Grep { .. } => 1,
        Op::Glob { .. } => 2,
        Op::Scanned => 3,
        Op::Warm { .. } => 4,
        Op::Stats => 5,
        Op::Stop => 6,
    };
    e.u8(tag);
    e.bytes(r.root_path.as_os_str().as_bytes());
    walk(&mut e, &r.walk);
    match &r.op {
        Op::Grep { pattern, opts } => {
            e.bytes(pattern.as_bytes());
            grep_options(&mut e, opts);
        }
        Op::Glob { sort } => e.bool(*sort == GlobSort::Modified),
        Op::Warm { timeout } => e.u64(timeout.as_millis().min(u64::MAX as u128) as u64),
        Op::Scanned | Op::Stats | Op::Stop => {}
    }
    e.0
}

pub(crate) fn decode_request(body: &[u8]) -> Option<Request> {
    let mut d = Dec::new(body);
    if d.u32()? != PROTOCOL {
        return None;
    }
    let build = d.bytes()?.to_vec();
    let key = d.bytes()?.to_vec();
    let tag = d.u8()?;
    let root_path = PathBuf::from(OsStr::from_bytes(d.bytes()?));
    let walk = read_walk(&mut d)?;
    let op = match tag {
        1 => Op::Grep {
            pattern: string(&mut d)?,
            opts: read_grep_options(&mut d)?,
        },
        2 => Op::Glob {
            sort: if d.bool()? {
                GlobSort::Modified
            } else {
                GlobSort::Path
            },
        },
        3 => Op::Scanned,
        4 => Op::Warm {
            timeout: Duration::from_millis(d.u64()?),
        },
        5 => Op::Stats,
        6 => Op::Stop,
        _ => return None,
    };
    d.done().then_some(Request {
        build,
        key,
        root_path,
        walk,
        op,
    })
}

fn stats(e: &mut Enc, s: &SkipStats) {
    for v in [
        s.ignored,
        s.hidden,
        s.binary,
        s.outside_roots,
        s.errors,
        s.files,
    ] {
        e.u64(v);
    }
    strings(e, &s.first_errors);
}

fn read_stats(d: &mut Dec<'_>) -> Option<SkipStats> {
    Some(SkipStats {
        ignored: d.u64()?,
        hidden: d.u64()?,
        binary: d.u64()?,
        outside_roots: d.u64()?,
        errors: d.u64()?,
        files: d.u64()?,
        first_errors: read_strings(d)?,
    })
}

fn kind_code(k: RowKind) -> u8 {
    match k {
        RowKind::Match => 0,
        RowKind::Context => 1,
        RowKind::Break => 2,
        RowKind::File => 3,
        RowKind::Count => 4,
    }
}

fn row(e: &mut Enc, r: &Row) {
    e.u8(kind_code(r.kind));
    e.u64(r.line);
    e.u64(r.byte_offset);
    e.bytes(r.text.as_bytes());
    e.bool(r.truncated);
    e.len(r.submatches.len());
    for &(a, b) in &r.submatches {
        e.len(a);
        e.len(b);
    }
    e.u64(r.count);
}

fn read_row(d: &mut Dec<'_>) -> Option<Row> {
    let kind = match d.u8()? {
        0 => RowKind::Match,
        1 => RowKind::Context,
        2 => RowKind::Break,
        3 => RowKind::File,
        4 => RowKind::Count,
        _ => return None,
    };
    let (line, byte_offset) = (d.u64()?, d.u64()?);
    let text = string(d)?;
    let truncated = d.bool()?;
    let n = d.len(16)?;
    let submatches = (0..n)
        .map(|_| Some((usize_of(d)?, usize_of(d)?)))
        .collect::<Option<Vec<_>>>()?;
    Some(Row {
        kind,
        line,
        byte_offset,
        text,
        truncated,
        submatches,
        count: d.u64()?,
    })
}

fn index_stats(e: &mut Enc, s: &IndexStats) {
    e.bytes(s.state.as_bytes());
    e.len(s.files);
    e.u64(s.bytes);
    e.len(s.memory);
    e.len(s.dirty);
    e.len(s.watched);
    e.bool(s.watching);
    e.u64(s.served);
    opt_u64(e, s.build_seconds.map(f64::to_bits));
    e.bool(s.restored);
    e.len(s.texts);
}

fn read_index_stats(d: &mut Dec<'_>) -> Option<IndexStats> {
    Some(IndexStats {
        state: string(d)?,
        files: usize_of(d)?,
        bytes: d.u64()?,
        memory: usize_of(d)?,
        dirty: usize_of(d)?,
        watched: usize_of(d)?,
        watching: d.bool()?,
        served: d.u64()?,
        build_seconds: read_opt_u64(d)?.map(f64::from_bits),
        restored: d.bool()?,
        texts: usize_of(d)?,
    })
}

pub(crate) fn encode_reply(r: &Reply) -> Vec<u8> {
    let mut e = Enc::default();
    match r {
        Reply::Grep(out) => {
            e.u8(1);
            e.len(out.files.len());
            for f in &out.files {
                e.bytes(f.path.as_os_str().as_bytes());
                e.bytes(f.display.as_bytes());
                e.bool(f.rows.is_some());
                let rows = f.rows.as_deref().unwrap_or_default();
                e.len(rows.len());
                for r in rows {
                    row(&mut e, r);
                }
                e.len(f.row_count);
                e.u64(f.match_lines);
            }
            stats(&mut e, &out.stats);
        }
        Reply::Glob(out) => {
            e.u8(2);
            e.len(out.files.len());
            for f in &out.files {
                e.bytes(f.display.as_bytes());
                let since = f.modified.and_then(|m| m.duration_since(UNIX_EPOCH).ok());
                e.bool(since.is_some());
                let since = since.unwrap_or_default();
                e.u64(since.as_secs());
                e.u32(since.subsec_nanos());
            }
            stats(&mut e, &out.stats);
        }
        Reply::NotReady => e.u8(3),
        Reply::Done(ok) => {
            e.u8(4);
            e.bool(*ok);
        }
        Reply::Stats(s) => {
            e.u8(5);
            index_stats(&mut e, s);
        }
        Reply::Refused(why) => {
            e.u8(6);
            e.bytes(why.as_bytes());
        }
    }
    e.0
}

pub(crate) fn decode_reply(body: &[u8]) -> Option<Reply> {
    let mut d = Dec::new(body);
    let reply = match d.u8()? {
        1 => {
            let n = d.len(32)?;
            let mut files = Vec::with_capacity(n);
            for _ in 0..n {
                let path = d.rel_path()?;
                let display = string(&mut d)?;
                let kept = d.bool()?;
                let count = d.len(40)?;
                let rows = (0..count)
                    .map(|_| read_row(&mut d))
                    .collect::<Option<Vec<_>>>()?;
                files.push(FileHits {
                    path,
                    display,
                    rows: kept.then_some(rows),
                    row_count: usize_of(&mut d)?,
                    match_lines: d.u64()?,
                });
            }
            Reply::Grep(GrepOutcome {
                files,
                stats: read_stats(&mut d)?,
                root: None,
            })
        }
        2 => {
            let n = d.len(21)?;
            let mut files = Vec::with_capacity(n);
            for _ in 0..n {
                let display = string(&mut d)?;
                let known = d.bool()?;
                let since = Duration::new(d.u64()?, d.u32()?);
                files.push(GlobHit {
                    display,
                    modified: known.then(|| UNIX_EPOCH.checked_add(since)).flatten(),
                });
            }
            Reply::Glob(GlobOutcome {
                files,
                stats: read_stats(&mut d)?,
            })
        }
        3 => Reply::NotReady,
        4 => Reply::Done(d.bool()?),
        5 => Reply::Stats(read_index_stats(&mut d)?),
        6 => Reply::Refused(string(&mut d)?),
        _ => return None,
    };
    d.done().then_some(reply)
}

/// Send one frame, with `fd` attached to its first byte.
pub(crate) fn send(stream: &UnixStream, body: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    let head = len.to_le_bytes();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = fd.map(|fd| [fd]);
    if let Some(fds) = &fds {
        control.push(SendAncillaryMessage::ScmRights(fds));
    }
    let iov = [IoSlice::new(&head), IoSlice::new(body)];
    let sent = sendmsg(stream.as_fd(), &iov, &mut control, SendFlags::NOSIGNAL)?;
    // The rest, if the socket took only part of it (the descriptor went with the first byte).
    let mut w = stream;
    let total = head.len() + body.len();
    if sent < head.len() {
        w.write_all(&head[sent..])?;
        w.write_all(body)?;
    } else if sent < total {
        w.write_all(&body[sent - head.len()..])?;
    }
    Ok(())
}

/// Receive one frame of at most `max` bytes, and the descriptors that came with it (at most
/// one is kept; more make the frame refused).
/// Reads that must all be done by a deadline: each read waits only for the time left, so a
/// peer sending a byte now and then cannot stretch a frame (a read timeout alone restarts with
/// every byte).
struct ByDeadline<'a> {
    stream: &'a UnixStream,
    deadline: Option<Instant>,
}

impl ByDeadline<'_> {
    fn arm(&self) -> io::Result<()> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.stream.set_read_timeout(Some(left))?;
        }
        Ok(())
    }
}

impl Read for ByDeadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// The most of a frame's length allocated before its bytes come.
const PREALLOCATE: usize = 1 << 20;

/// How long a frame may take once its first bytes came (a client sends one in one go).
pub(crate) const FRAME_WAIT: Duration = Duration::from_secs(5);

/// One frame, as `recv_by` with no deadline for its first bytes.
pub(crate) fn recv(stream: &UnixStream, max: usize) -> io::Result<(Vec<u8>, Option<OwnedFd>)> {
    recv_by(stream, max, None)
}

/// One frame (its body and the descriptor sent with it); with `deadline`, all of it by then,
/// else its first bytes whenever they come and the rest within FRAME_WAIT.
pub(crate) fn recv_by(
    stream: &UnixStream,
    max: usize,
    deadline: Option<Instant>,
) -> io::Result<(Vec<u8>, Option<OwnedFd>)> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    // The stream's own read timeout (a client's wait for its daemon) is back as it was after.
    let restore = Restore {
        stream,
        timeout: stream.read_timeout()?,
    };
    let mut reader = ByDeadline { stream, deadline };
    reader.arm()?;
    let mut head = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = {
        let mut iov = [IoSliceMut::new(&mut head)];
        recvmsg(
            stream.as_fd(),
            &mut iov,
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?
    };
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.bytes == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if got.flags.contains(rustix::net::ReturnFlags::CTRUNC) || fds.len() > 1 {
        return Err(bad("too many descriptors"));
    }
    let frame_by = Instant::now() + FRAME_WAIT;
    reader.deadline = Some(deadline.map_or(frame_by, |d| d.min(frame_by)));
    reader.read_exact(&mut head[got.bytes..])?;
    let len = u32::from_le_bytes(head) as usize;
    if len > max {
        return Err(bad("frame too large"));
    }
    // Room for the frame at once (read_to_end would probe with 32 bytes and double, a read and
    // a timeout set per step), up to a bound a peer's claimed length cannot pin beyond.
    let mut body = Vec::with_capacity(len.min(PREALLOCATE));
    (&mut reader).take(len as u64).read_to_end(&mut body)?;
    if body.len() != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    drop(restore);
    Ok((body, fds.pop()))
}

struct Restore<'a> {
    stream: &'a UnixStream,
    timeout: Option<Duration>,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let _ = self.stream.set_read_timeout(self.timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> GrepOutcome {
        let row = Row {
            kind: RowKind::Match,
            line: 3,
            byte_offset: 40,
            text: "a needle here".into(),
            truncated: false,
            submatches: vec![(2, 8)],
            count: 0,
        };
        GrepOutcome {
            files: vec![
                FileHits {
                    path: "src/a.py".into(),
                    display: "src/a.py".into(),
                    rows: Some(vec![row]),
                    row_count: 1,
                    match_lines: 1,
                },
                FileHits {
                    path: "b.txt".into(),
                    display: "b.txt".into(),
                    rows: None,
                    row_count: 4,
                    match_lines: 2,
                },
            ],
            stats: SkipStats {
                ignored: 2,
                first_errors: vec!["x: denied".into()],
                files: 9,
                ..SkipStats::default()
            },
            root: None,
        }
    }

    #[test]
    fn a_reply_comes_back_as_it_was_sent() {
        let bytes = encode_reply(&Reply::Grep(sample()));
        let Some(Reply::Grep(back)) = decode_reply(&bytes) else {
            panic!("not decoded");
        };
        let want = sample();
        assert_eq!(back.stats, want.stats);
        assert_eq!(back.files.len(), 2);
        assert_eq!(back.files[0].rows, want.files[0].rows);
        assert!(back.files[1].rows.is_none());
        assert_eq!(back.files[1].row_count, 4);
    }

    /// Cut, flipped or random frames never panic and never decode into something else than
    /// what a whole frame said: every count is checked against what is left.
    #[test]
    fn damaged_frames_are_refused_not_followed() {
        let whole = encode_reply(&Reply::Grep(sample()));
        for cut in 0..whole.len() {
            assert!(
                decode_reply(&whole[..cut]).is_none(),
                "a frame cut at {cut}"
            );
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut bytes = whole.clone();
            let at = (seed as usize) % bytes.len();
            bytes[at] ^= (seed >> 32) as u8 | 1;
            let _ = decode_reply(&bytes);
            let len = (seed >> 40) as usize % 200;
            let noise: Vec<u8> = (0..len).map(|i| (seed >> (i % 56)) as u8).collect();
            let _ = decode_reply(&noise);
            let _ = decode_request(&noise);
        }
        // A count that claims more items than the bytes left could hold.
        let mut huge = vec![1u8];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_reply(&huge).is_none());
    }
}

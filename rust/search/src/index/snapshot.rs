//! One index's contents as bytes and back: the file list with its stamps, the postings, the
//! per-file facts and the files changed since the build. Decoding checks every length against
//! what is left and every name and path for shape, so a damaged or crafted body gives `None`
//! (never a panic, never a huge allocation, never a path outside the root); `cache.rs` adds the
//! checksum and says whose file it is.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::build::Facts;
use super::postings::{Postings, Shard};
use super::state::{Over, Phase, State};
use super::texts::Texts;
use super::tree::{DirNode, DirStamp, Stamp, Tree};

/// What a snapshot gives back: the parts of a ready `State`, and the next free file id.
pub(crate) struct Contents {
    pub(crate) tree: Tree,
    pub(crate) postings: Postings,
    pub(crate) facts: Vec<Facts>,
    pub(crate) over: FxHashMap<u32, Over>,
    pub(crate) bytes: u64,
    pub(crate) next_id: u32,
}

impl Contents {
    /// An index read back from the cache: ready, but to be checked against the tree before it
    /// answers (`Index::restore`).
    pub(crate) fn restored(mut self) -> State {
        // Changes of files no longer listed (kept by a build before `files_left` let them go)
        // could never be folded: they go now.
        let listed: rustc_hash::FxHashSet<u32> = (self.tree.dirs.values())
            .flat_map(|node| node.files.iter().map(|(_, id)| *id))
            .collect();
        self.over.retain(|id, _| listed.contains(id));
        State {
            phase: Phase::Ready,
            tree: self.tree,
            postings: self.postings,
            facts: self.facts,
            seq: self.over.len() as u64,
            over: self.over,
            bytes: self.bytes,
            build_time: None,
            texts: Texts::default(),
        }
    }
}

#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn i128(&mut self, v: i128) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }

    fn stamp(&mut self, s: &Stamp) {
        match s {
            None => self.bool(false),
            Some((ino, ctime)) => {
                self.bool(true);
                self.u64(*ino);
                self.i128(*ctime);
            }
        }
    }

    fn facts(&mut self, f: &Facts) {
        self.u8(u8::from(f.has_nul) | (u8::from(f.unsure) << 1));
        self.u64(f.ident.0);
        self.u64(f.ident.1);
        self.i128(f.ident.2);
    }
}

/// A reader over `buf[at..]` that knows where it is (restored shards are views of `buf`).
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }

    pub(crate) fn done(&self) -> bool {
        self.at == self.buf.len()
    }

    fn left(&self) -> usize {
        self.buf.len() - self.at
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.left() {
            return None;
        }
        let head = &self.buf[self.at..self.at + n];
        self.at += n;
        Some(head)
    }

    /// Take `head` bytes, returning where they start in the buffer.
    pub(crate) fn skip(&mut self, head: usize) -> Option<usize> {
        let at = self.at;
        self.take(head)?;
        Some(at)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    pub(crate) fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    pub(crate) fn i128(&mut self) -> Option<i128> {
        self.array().map(i128::from_le_bytes)
    }

    /// `n` little-endian `u32`s, converted in one pass.
    fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        let raw = self.take(n.checked_mul(4)?)?;
        let words = raw.chunks_exact(4);
        Some(
            words
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
        )
    }

    /// A count of items at least `each` bytes long: never more than what is left could hold,
    /// so a forged count cannot make a huge allocation.
    pub(crate) fn len(&mut self, each: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(each.max(1))? <= self.left()).then_some(n)
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.len(1)?;
        self.take(n)
    }

    fn stamp(&mut self) -> Option<Stamp> {
        Some(if self.bool()? {
            Some((self.u64()?, self.i128()?))
        } else {
            None
        })
    }

    fn facts(&mut self) -> Option<Facts> {
        let bits = self.u8()?;
        if bits > 3 {
            return None;
        }
        Some(Facts {
            has_nul: bits & 1 != 0,
            unsure: bits & 2 != 0,
            ident: (self.u64()?, self.u64()?, self.i128()?),
        })
    }

    /// A file or folder name as a listing holds it: one plain component.
    fn name(&mut self) -> Option<Box<[u8]>> {
        let name = self.bytes()?;
        let plain = !name.is_empty()
            && name != b"."
            && name != b".."
            && !name.iter().any(|&b| b == b'/' || b == 0);
        plain.then(|| name.into())
    }

    /// A root-relative path: plain components only (the root is empty).
    pub(crate) fn rel_path(&mut self) -> Option<PathBuf> {
        let path = Path::new(OsStr::from_bytes(self.bytes()?));
        let plain = path.components().all(|c| matches!(c, Component::Normal(_)))
            && !path.as_os_str().as_bytes().contains(&0);
        plain.then(|| path.to_path_buf())
    }
}

/// `state`'s contents (a ready index), with the next id it would give a file.
pub(crate) fn encode(c: &State, next_id: u32, out: &mut Enc) {
    out.u32(next_id);
    out.u64(c.bytes);
    out.len(c.tree.dirs.len());
    for (dir, node) in &c.tree.dirs {
        out.bytes(dir.as_os_str().as_bytes());
        out.stamp(&node.stamp.dir);
        for rule in &node.stamp.rules {
            out.stamp(rule);
        }
        out.len(node.files.len());
        for (name, id) in &node.files {
            out.bytes(name);
            out.u32(*id);
        }
        out.len(node.dirs.len());
        for name in &node.dirs {
            out.bytes(name);
        }
        out.len(node.skipped.len());
        for (name, is_dir, hidden) in &node.skipped {
            out.bytes(name);
            out.u8(u8::from(*is_dir) | (u8::from(*hidden) << 1));
        }
    }
    out.len(c.facts.len());
    c.facts.iter().for_each(|f| out.facts(f));
    out.len(c.over.len());
    for (id, over) in &c.over {
        out.u32(*id);
        match over {
            Over::Dirty { path, .. } => {
                out.u8(0);
                out.bytes(path.as_os_str().as_bytes());
            }
            Over::Folded { grams, facts } => {
                out.u8(1);
                out.len(grams.len());
                grams.iter().for_each(|&g| out.u32(g));
                out.facts(facts);
            }
        }
    }
    // Last and as they are in memory: a restored index reads them in place.
    out.u32(c.postings.len);
    out.len(c.postings.shards.len());
    for shard in &c.postings.shards {
        let (n, region) = shard.region();
        out.len(n);
        out.bytes(region);
    }
}

/// The contents encoded in `file[from..to]` back; `None` for anything malformed, or left over
/// at the end. The postings are views of `file`, not copies.
pub(crate) fn decode(file: &Arc<Vec<u8>>, from: usize, to: usize) -> Option<Contents> {
    let mut d = Dec::new(file.get(..to)?);
    d.skip(from)?;
    let next_id = d.u32()?;
    let bytes = d.u64()?;
    let mut tree = Tree::default();
    for _ in 0..d.len(8 + 5 + 24)? {
        let dir = d.rel_path()?;
        let mut stamp = DirStamp {
            dir: d.stamp()?,
            rules: [None; 4],
        };
        for rule in stamp.rules.iter_mut() {
            *rule = d.stamp()?;
        }
        let mut node = DirNode {
            stamp,
            ..DirNode::default()
        };
        for _ in 0..d.len(8 + 4)? {
            let name = d.name()?;
            let id = d.u32()?;
            if id >= next_id {
                return None;
            }
            node.files.push((name, id));
        }
        for _ in 0..d.len(8)? {
            node.dirs.push(d.name()?);
        }
        for _ in 0..d.len(8 + 1)? {
            let name = d.name()?;
            let bits = d.u8()?;
            if bits > 3 {
                return None;
            }
            node.skipped.push((name, bits & 1 != 0, bits & 2 != 0));
        }
        node.sort(); // a file written by an older build may hold names unsorted
        if tree.dirs.insert(dir, node).is_some() {
            return None;
        }
    }
    // Every folder's parent is listed too (the root is, as ""), as a walk lists them.
    let orphan = tree.dirs.keys().any(|dir| {
        dir.parent()
            .is_some_and(|parent| !tree.dirs.contains_key(parent))
    });
    if orphan || !tree.dirs.contains_key(Path::new("")) {
        return None;
    }
    let facts_len = d.len(1 + 32)?;
    let facts = (0..facts_len)
        .map(|_| d.facts())
        .collect::<Option<Vec<_>>>()?;
    let mut over = FxHashMap::default();
    for seq in 0..d.len(4 + 1)? {
        let id = d.u32()?;
        if id >= next_id {
            return None;
        }
        let entry = match d.u8()? {
            0 => Over::Dirty {
                seq: seq as u64 + 1,
                path: d.rel_path()?,
            },
            1 => {
                let n = d.len(4)?;
                let grams = d.u32s(n)?.into_boxed_slice();
                // `matches` looks grams up by binary search.
                if !grams.windows(2).all(|w| w[0] < w[1]) {
                    return None;
                }
                Over::Folded {
                    grams,
                    facts: d.facts()?,
                }
            }
            _ => return None,
        };
        over.insert(id, entry);
    }
    let len = d.u32()?;
    if len > next_id || facts.len() != len as usize {
        return None;
    }
    let mut shards = Vec::new();
    for _ in 0..d.len(8 + 8)? {
        let n = d.len(12)?;
        let size = d.len(1)?;
        let at = d.skip(size)?;
        shards.push(Shard::view(file, at, size, n)?);
    }
    if !d.done() {
        return None;
    }
    Some(Contents {
        tree,
        postings: Postings { shards, len },
        facts,
        over,
        bytes,
        next_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::postings::ShardBuilder;

    fn sample() -> Contents {
        let mut tree = Tree::default();
        let mut root = DirNode::default();
        root.files.push((b"a.py".to_vec().into(), 0));
        root.dirs.push(b"src".to_vec().into());
        root.skipped.push((b".env".to_vec().into(), false, true));
        root.stamp.dir = Some((7, 1_700_000_000_123_456_789));
        tree.dirs.insert(PathBuf::new(), root);
        let mut src = DirNode::default();
        src.files.push((b"b.rs".to_vec().into(), 1));
        src.files.push((b"new.rs".to_vec().into(), 2));
        tree.dirs.insert(PathBuf::from("src"), src);
        let mut shard = ShardBuilder::default();
        shard.add(0, &[10, 20]);
        shard.add(1, &[20]);
        let mut over = FxHashMap::default();
        over.insert(
            1,
            Over::Folded {
                grams: vec![5, 20].into(),
                facts: Facts::default(),
            },
        );
        over.insert(
            2,
            Over::Dirty {
                seq: 9,
                path: PathBuf::from("src/new.rs"),
            },
        );
        Contents {
            tree,
            postings: Postings {
                shards: vec![shard.finish()],
                len: 2,
            },
            facts: vec![Facts::default(); 2],
            over,
            bytes: 42,
            next_id: 3,
        }
    }

    fn encoded_from(c: Contents) -> Vec<u8> {
        let next_id = c.next_id;
        let mut enc = Enc::default();
        encode(&c.restored(), next_id, &mut enc);
        enc.0
    }

    fn encoded() -> Vec<u8> {
        encoded_from(sample())
    }

    /// Decoded from a buffer with other bytes around it, as in a cache file.
    fn decoded(body: &[u8]) -> Option<Contents> {
        let file = Arc::new([b"head".as_slice(), body, b"tail"].concat());
        decode(&file, 4, 4 + body.len())
    }

    #[test]
    fn contents_come_back() {
        let bytes = encoded();
        let back = decoded(&bytes).expect("decodes");
        assert_eq!(back.next_id, 3);
        assert_eq!(back.bytes, 42);
        assert_eq!(back.tree.id(Path::new("src/b.rs")), Some(1));
        assert_eq!(
            back.tree.dirs[Path::new("")].stamp.dir,
            Some((7, 1_700_000_000_123_456_789))
        );
        let hits = back
            .postings
            .eval(&super::super::plan::Query::Grams(vec![20]));
        assert!(hits.has(0) && hits.has(1));
        assert!(
            matches!(back.over.get(&2), Some(Over::Dirty { path, .. }) if path == Path::new("src/new.rs"))
        );
    }

    #[test]
    fn changes_of_files_no_longer_listed_are_not_restored() {
        let mut c = sample();
        let src = c.tree.dirs.get_mut(Path::new("src")).unwrap();
        src.files.retain(|(name, _)| &name[..] != b"new.rs");
        let state = c.restored();
        assert!(state.over.contains_key(&1) && !state.over.contains_key(&2));
        assert_eq!(state.dirty(), 0);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused_or_harmless() {
        let bytes = encoded();
        for cut in 0..bytes.len() {
            assert!(decoded(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        // A flipped byte either fails to decode or decodes to something well-formed: no panic.
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = bytes.clone();
                bad[i] ^= flip;
                if let Some(c) = decoded(&bad) {
                    let _ = c
                        .postings
                        .eval(&super::super::plan::Query::Grams(vec![10, 20]));
                }
            }
        }
    }

    #[test]
    fn paths_that_leave_the_root_are_refused() {
        let mut c = sample();
        let node = c.tree.dirs.remove(Path::new("src")).unwrap_or_default();
        c.tree.dirs.insert(PathBuf::from("../src"), node);
        assert!(decoded(&encoded_from(c)).is_none());
        let mut c = sample();
        if let Some(root) = c.tree.dirs.get_mut(Path::new("")) {
            root.files.push((b"../../etc/passwd".to_vec().into(), 0));
        }
        assert!(decoded(&encoded_from(c)).is_none());
    }
}

//! What one index holds (the file list, postings, per-file facts and what changed since) and
//! the questions queries ask of it.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use rustc_hash::FxHashMap;

use super::build::{Facts, Ident};
use super::plan::Query;
use super::postings::{matches, Bits, Postings};
use super::texts::Texts;
use super::tree::Tree;
use crate::walker::Walker;

/// Where an index stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    Building,
    Ready,
    /// Cannot be trusted any more (rules changed, events lost): replaced on the next query.
    Broken(String),
    /// The tree holds what the index cannot reproduce (unreadable files, ...): scanned as today.
    Unusable(String),
}

/// A file whose indexed trigrams are stale.
pub(crate) enum Over {
    /// Searched on every query until re-read (`seq` tells a later change from this one).
    Dirty {
        seq: u64,
        path: PathBuf,
    },
    Folded {
        grams: Box<[u32]>,
        facts: Facts,
    },
}

pub(crate) struct State {
    pub(crate) phase: Phase,
    pub(crate) tree: Tree,
    pub(crate) postings: Postings,
    pub(crate) facts: Vec<Facts>,
    pub(crate) over: FxHashMap<u32, Over>,
    /// Counts every change marked (a later read can tell it saw none since an earlier one).
    pub(crate) seq: u64,
    pub(crate) bytes: u64,
    pub(crate) build_time: Option<Duration>,
    /// Texts of unchanged files kept from queries' reads.
    pub(crate) texts: Texts,
}

/// A file a query must search: when the index holds it as unchanged, its id and identity, and
/// its kept text if there is one.
pub(crate) struct Pick {
    /// Where its path ends in `Picks::paths` (it starts where the previous one ends).
    end: usize,
    pub(crate) trusted: Option<(u32, Ident)>,
    /// Its text is kept (in the table `Picks::texts`).
    pub(crate) kept: bool,
}

/// The files a query must search, their root-relative paths in one buffer (a dense query picks
/// every file; one allocation per path cost more than searching a kept text).
#[derive(Default)]
pub(crate) struct Picks {
    paths: Vec<u8>,
    list: Vec<Pick>,
    /// The kept texts, as they were when the files were picked.
    pub(crate) texts: super::texts::View,
}

impl Picks {
    fn push(&mut self, dir: &std::path::Path, name: &[u8], pick: impl FnOnce(usize) -> Pick) {
        let dir = dir.as_os_str().as_bytes();
        if !dir.is_empty() {
            self.paths.extend_from_slice(dir);
            self.paths.push(b'/');
        }
        self.paths.extend_from_slice(name);
        self.list.push(pick(self.paths.len()));
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The `i`-th file, its root-relative path and its kept text.
    pub(crate) fn get(&self, i: usize) -> Option<(&Pick, &std::path::Path, Option<&[u8]>)> {
        let pick = self.list.get(i)?;
        let start = i.checked_sub(1).map_or(0, |j| self.list[j].end);
        let path = std::ffi::OsStr::from_bytes(&self.paths[start..pick.end]);
        let text = match (pick.kept, pick.trusted) {
            (true, Some((id, _))) => self.texts.get(id as usize).and_then(|t| t.as_deref()),
            _ => None,
        };
        Some((pick, std::path::Path::new(path), text))
    }
}

impl State {
    /// `id` changed: searched from disk on every query until re-read.
    pub(crate) fn mark_dirty(&mut self, id: u32, path: PathBuf) {
        self.seq += 1;
        let seq = self.seq;
        self.over.insert(id, Over::Dirty { seq, path });
        self.texts.forget(id);
    }

    /// These files left the tree: their kept texts and their changes go too (an id is never
    /// given again, and a dirty entry of a file that is gone could never be re-read: it would
    /// stay, and be tried first on every fold, for the index's life).
    pub(crate) fn files_left(&mut self, ids: impl IntoIterator<Item = u32>) {
        for id in ids {
            self.texts.forget(id);
            self.over.remove(&id);
        }
    }

    /// Who an indexed file was when last read; `None` while it is dirty.
    pub(crate) fn ident(&self, id: u32) -> Option<Ident> {
        match self.over.get(&id) {
            Some(Over::Dirty { .. }) => None,
            Some(Over::Folded { facts, .. }) => Some(facts.ident),
            None => self.facts.get(id as usize).map(|f| f.ident),
        }
    }

    /// The files the walk of `w` would search that can match `q` (root-relative), and the
    /// skip counts of all it would search; `None` when the start is not covered.
    pub(crate) fn select(
        &self,
        w: &Walker,
        q: &Query,
        multiline: bool,
    ) -> Option<(Picks, crate::SkipStats)> {
        let bits = (*q != Query::All).then(|| self.postings.eval(q));
        let mut picks = Picks {
            texts: self.texts.view(),
            ..Picks::default()
        };
        let (mut files, mut binary) = (0, 0);
        let mut stats = self.tree.replay(w, |dir, name, id| {
            let (facts, indexed) = match self.over.get(&id) {
                Some(Over::Dirty { .. }) => (None, true),
                Some(Over::Folded { grams, facts }) => (Some(*facts), matches(q, grams)),
                None => match self.facts.get(id as usize) {
                    Some(f) => (Some(*f), bits.as_ref().is_none_or(|b: &Bits| b.has(id))),
                    None => (None, true),
                },
            };
            let candidate = match facts {
                None => true,
                // A multiline search reads the whole file and only looks for a NUL near the
                // start: trigrams taken up to the first NUL do not cover it.
                Some(f) => f.unsure || (multiline && f.has_nul) || indexed,
            };
            if candidate {
                let trusted = facts.filter(|f| !f.unsure).map(|f| (id, f.ident));
                picks.push(dir, name, |end| Pick {
                    end,
                    trusted,
                    kept: trusted.is_some() && self.texts.has(id),
                });
            } else {
                // Not searched, but the searcher would have read it to its NUL, matching nothing.
                files += 1;
                binary += u64::from(facts.is_some_and(|f| f.has_nul));
            }
        })?;
        stats.files += files;
        stats.binary += binary;
        Some((picks, stats))
    }

    /// Every file the walk of `w` would yield (root-relative) and its skip counts, `files`
    /// included; `None` when the start is not covered.
    pub(crate) fn list(&self, w: &Walker) -> Option<(Vec<PathBuf>, crate::SkipStats)> {
        let mut paths = Vec::new();
        let mut stats = self.tree.replay(w, |dir, name, _| {
            paths.push(dir.join(std::ffi::OsStr::from_bytes(name)));
        })?;
        stats.files = paths.len() as u64;
        Some((paths, stats))
    }

    /// Search every file with one of these inodes on each query from now on.
    pub(crate) fn distrust_inodes(&mut self, inodes: &[u64]) {
        let inodes: rustc_hash::FxHashSet<u64> = inodes.iter().copied().collect();
        let mut untrusted = Vec::new();
        for (id, facts) in self.facts.iter_mut().enumerate() {
            if inodes.contains(&facts.ident.0) {
                facts.unsure = true;
                untrusted.push(id as u32);
            }
        }
        for (id, over) in self.over.iter_mut() {
            if let Over::Folded { facts, .. } = over {
                if inodes.contains(&facts.ident.0) {
                    facts.unsure = true;
                    untrusted.push(*id);
                }
            }
        }
        for id in untrusted {
            self.texts.forget(id);
        }
    }

    pub(crate) fn files(&self) -> usize {
        self.tree.file_count()
    }

    pub(crate) fn dirty(&self) -> usize {
        self.over
            .values()
            .filter(|o| matches!(o, Over::Dirty { .. }))
            .count()
    }

    /// Bytes held: postings, per-file facts, the file list and folded files.
    pub(crate) fn memory(&self) -> usize {
        let tree: usize = self
            .tree
            .dirs
            .iter()
            .map(|(k, n)| {
                // The map entry (key, node with its stamp) plus the names held.
                k.as_os_str().len()
                    + size_of::<(PathBuf, super::tree::DirNode)>()
                    + 16
                    + n.files.iter().map(|(f, _)| f.len() + 24).sum::<usize>()
                    + n.dirs.iter().map(|d| d.len() + 16).sum::<usize>()
                    + n.skipped
                        .iter()
                        .map(|(s, _, _)| s.len() + 24)
                        .sum::<usize>()
            })
            .sum();
        let over: usize = self
            .over
            .values()
            .map(|o| match o {
                Over::Dirty { path, .. } => path.as_os_str().len() + 48,
                Over::Folded { grams, .. } => grams.len() * 4 + size_of::<Over>() + 8,
            })
            .sum();
        self.postings.memory()
            + self.facts.capacity() * size_of::<Facts>()
            + tree
            + over
            + self.texts.memory()
    }
}

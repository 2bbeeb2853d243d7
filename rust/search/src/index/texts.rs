//! File texts kept in memory for the candidate scan. When the index cannot prune (most files
//! match most queries), opening and reading each candidate is most of a query's time, so the
//! text of a file a query read is kept, under one byte budget for the whole process
//! (`TOOLROUTE_SEARCH_INDEX_TEXTS`, default 256 MiB; `0` keeps none).
//!
//! A kept text is trusted exactly as far as the index trusts the file's trigrams: it is
//! forgotten whenever the file is marked dirty, re-read or leaves the tree, and is learned only
//! from a read of a file the index held as unchanged, whose identity (inode, size, change time)
//! was the indexed one, made while the index saw no change at all since the query's check
//! (`State::seq`). Files with several links, a byte order mark, a NUL byte or more than
//! [`MAX_TEXT`] bytes are always read from disk.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Larger files are read from disk on every query: their time is the search, not the open.
pub(crate) const MAX_TEXT: u64 = 1 << 20;

/// Bytes all indexes' kept texts hold together.
static HELD: AtomicUsize = AtomicUsize::new(0);

fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| super::config::IndexConfig::current().texts)
}

/// Whether queries should read candidates whole to keep them (the budget is not zero).
pub(crate) fn enabled() -> bool {
    budget() > 0
}

/// The kept texts by file id, as a query reads them once it has let go of the index's lock.
pub(crate) type View = Arc<Vec<Option<Arc<[u8]>>>>;

/// One index's kept texts, by file id (ids are dense: a slot per id up to the highest kept). A
/// query takes the whole table (one count for all), not each text: touching 20,000 texts'
/// counts twice per query cost a tenth of a dense query. A change while a query holds the table
/// copies the slots (not the texts).
#[derive(Default)]
pub(crate) struct Texts {
    by_id: View,
    bytes: usize,
}

impl Texts {
    pub(crate) fn has(&self, id: u32) -> bool {
        self.by_id.get(id as usize).is_some_and(Option::is_some)
    }

    #[cfg(test)]
    pub(crate) fn text(&self, id: u32) -> Option<&[u8]> {
        self.by_id.get(id as usize)?.as_deref()
    }

    pub(crate) fn view(&self) -> View {
        Arc::clone(&self.by_id)
    }

    pub(crate) fn forget(&mut self, id: u32) {
        if !self.has(id) {
            return;
        }
        if let Some(text) = Arc::make_mut(&mut self.by_id)[id as usize].take() {
            self.bytes -= text.len();
            HELD.fetch_sub(text.len(), Ordering::Relaxed);
        }
    }

    /// Keep `text` for `id` if the budget has room; the bytes it added.
    pub(crate) fn learn(&mut self, id: u32, text: Vec<u8>) -> usize {
        let len = text.len();
        let room = HELD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
            (held + len <= budget()).then_some(held + len)
        });
        if room.is_err() {
            return 0;
        }
        self.forget(id);
        let slot = id as usize;
        let slots = Arc::make_mut(&mut self.by_id);
        if slots.len() <= slot {
            slots.resize(slot + 1, None);
        }
        slots[slot] = Some(text.into());
        self.bytes += len;
        len
    }

    /// Bytes of text kept.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes held, with the slots' own cost.
    pub(crate) fn memory(&self) -> usize {
        self.bytes + self.by_id.capacity() * size_of::<Option<Arc<[u8]>>>()
    }
}

impl Drop for Texts {
    fn drop(&mut self) {
        HELD.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Whether a text just read may be kept: no NUL (a slice is searched for binary data only near
/// its start; a kept text must give what reading the file gives) and no byte order mark (the
/// searcher transcodes those).
pub(crate) fn keepable(text: &[u8]) -> bool {
    memchr::memchr(0, text).is_none() && !super::trigram::BOMS.iter().any(|b| text.starts_with(b))
}

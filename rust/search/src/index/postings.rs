//! Posting lists: for each trigram, the ids of the files holding it, delta- and varint-encoded.
//! Each walk thread fills its own shard (its ids only grow), so nothing is merged: a lookup ORs
//! the shards' lists into a bitset over file ids.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::plan::Query;

/// One thread's lists while building.
#[derive(Default)]
pub(crate) struct ShardBuilder {
    lists: FxHashMap<u32, (u32, Vec<u8>)>,
}

impl ShardBuilder {
    /// Record that file `id` (greater than any earlier id of this shard) holds `grams`.
    pub(crate) fn add(&mut self, id: u32, grams: &[u32]) {
        for &g in grams {
            let (last, bytes) = self.lists.entry(g).or_insert((0, Vec::new()));
            // The first id is stored as id+1 from 0, so 0 is never a delta.
            put_varint(bytes, id + 1 - *last);
            *last = id + 1;
        }
    }

    pub(crate) fn finish(self) -> Shard {
        let mut keys: Vec<u32> = self.lists.keys().copied().collect();
        keys.sort_unstable();
        let data_len: usize = self.lists.values().map(|(_, b)| b.len()).sum();
        let n = keys.len();
        let mut region = Vec::with_capacity(12 * n + 8 + data_len);
        for k in &keys {
            region.extend_from_slice(&k.to_le_bytes());
        }
        let mut at = 0u64;
        for k in &keys {
            region.extend_from_slice(&at.to_le_bytes());
            at += self.lists.get(k).map_or(0, |(_, b)| b.len() as u64);
        }
        region.extend_from_slice(&at.to_le_bytes());
        let mut lists = self.lists;
        for k in &keys {
            if let Some((_, bytes)) = lists.remove(k) {
                region.extend_from_slice(&bytes);
            }
        }
        let len = region.len();
        Shard {
            buf: Arc::new(region),
            at: 0,
            len,
            n,
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One thread's lists, frozen, as one region of bytes: `n` sorted trigrams (`u32`), where each
/// one's ids start (`n + 1` `u64`s, the last is the end), then the encoded ids. The region is
/// the same in memory and in a snapshot, so a restored index shares the file's bytes instead of
/// converting them.
pub(crate) struct Shard {
    buf: Arc<Vec<u8>>,
    at: usize,
    len: usize,
    n: usize,
}

impl Shard {
    /// The region, as a snapshot stores it, and its trigram count.
    pub(crate) fn region(&self) -> (usize, &[u8]) {
        (self.n, &self.buf[self.at..self.at + self.len])
    }

    /// The shard stored in `buf[at..at + len]` with `n` trigrams, if its parts fit together:
    /// trigrams strictly rising, starts rising from 0 to the end of the ids.
    pub(crate) fn view(buf: &Arc<Vec<u8>>, at: usize, len: usize, n: usize) -> Option<Self> {
        let head = n.checked_mul(12)?.checked_add(8)?;
        if head > len || at.checked_add(len)? > buf.len() {
            return None;
        }
        let shard = Self {
            buf: Arc::clone(buf),
            at,
            len,
            n,
        };
        let rising = (1..n).all(|i| shard.key(i - 1) < shard.key(i));
        let ordered = (1..=n).all(|i| shard.start(i - 1) <= shard.start(i));
        let ends = shard.start(0) == 0 && shard.start(n) == (len - head) as u64;
        (rising && ordered && ends).then_some(shard)
    }

    fn key(&self, i: usize) -> u32 {
        let p = self.at + 4 * i;
        u32::from_le_bytes([
            self.buf[p],
            self.buf[p + 1],
            self.buf[p + 2],
            self.buf[p + 3],
        ])
    }

    fn start(&self, i: usize) -> u64 {
        let p = self.at + 4 * self.n + 8 * i;
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.buf[p..p + 8]);
        u64::from_le_bytes(word)
    }

    fn find(&self, gram: u32) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(&gram) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    fn or_into(&self, gram: u32, set: &mut Bits) {
        let Some(i) = self.find(gram) else {
            return;
        };
        let ids = self.at + 12 * self.n + 8;
        let bytes = &self.buf[ids + self.start(i) as usize..ids + self.start(i + 1) as usize];
        // Wrapping and bounded shifts: lists restored from disk cannot make this panic
        // (`Bits::set` ignores ids past the end).
        let (mut id, mut v, mut shift) = (0u32, 0u32, 0u32);
        for &b in bytes {
            v |= u32::from(b & 0x7F).wrapping_shl(shift);
            if b & 0x80 == 0 {
                id = id.wrapping_add(v);
                set.set(id.wrapping_sub(1));
                (v, shift) = (0, 0);
            } else {
                shift = (shift + 7).min(31);
            }
        }
    }

    pub(crate) fn memory(&self) -> usize {
        self.len
    }
}

/// A set of file ids.
#[derive(Clone)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    pub(crate) fn new(len: u32, full: bool) -> Self {
        Self(vec![
            if full { u64::MAX } else { 0 };
            (len as usize).div_ceil(64)
        ])
    }

    fn set(&mut self, i: u32) {
        if let Some(w) = self.0.get_mut((i >> 6) as usize) {
            *w |= 1 << (i & 63);
        }
    }

    pub(crate) fn has(&self, i: u32) -> bool {
        self.0
            .get((i >> 6) as usize)
            .is_some_and(|w| w & (1 << (i & 63)) != 0)
    }

    fn and(&mut self, other: &Bits) {
        self.0.iter_mut().zip(&other.0).for_each(|(a, b)| *a &= b);
    }

    fn or(&mut self, other: &Bits) {
        self.0.iter_mut().zip(&other.0).for_each(|(a, b)| *a |= b);
    }
}

/// All shards of one build, over ids `0..len`.
pub(crate) struct Postings {
    pub(crate) shards: Vec<Shard>,
    pub(crate) len: u32,
}

impl Postings {
    /// The files the query lets through (a superset of those that can match).
    pub(crate) fn eval(&self, q: &Query) -> Bits {
        match q {
            Query::All => Bits::new(self.len, true),
            Query::Grams(grams) => {
                let mut acc = Bits::new(self.len, true);
                for &g in grams {
                    let mut one = Bits::new(self.len, false);
                    for shard in &self.shards {
                        shard.or_into(g, &mut one);
                    }
                    acc.and(&one);
                }
                acc
            }
            Query::And(parts) => {
                let mut acc = Bits::new(self.len, true);
                for p in parts {
                    acc.and(&self.eval(p));
                }
                acc
            }
            Query::Or(parts) => {
                let mut acc = Bits::new(self.len, false);
                for p in parts {
                    acc.or(&self.eval(p));
                }
                acc
            }
        }
    }

    pub(crate) fn memory(&self) -> usize {
        self.shards.iter().map(Shard::memory).sum()
    }
}

/// The query on one file's own sorted trigrams (a file re-read since the build).
pub(crate) fn matches(q: &Query, grams: &[u32]) -> bool {
    match q {
        Query::All => true,
        Query::Grams(need) => need.iter().all(|g| grams.binary_search(g).is_ok()),
        Query::And(parts) => parts.iter().all(|p| matches(p, grams)),
        Query::Or(parts) => parts.iter().any(|p| matches(p, grams)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_union_and_queries_evaluate() {
        let mut a = ShardBuilder::default();
        a.add(0, &[1, 2]);
        a.add(200, &[2]);
        let mut b = ShardBuilder::default();
        b.add(5, &[1]);
        let p = Postings {
            shards: vec![a.finish(), b.finish()],
            len: 300,
        };
        let one = p.eval(&Query::Grams(vec![1]));
        assert!(one.has(0) && one.has(5) && !one.has(200));
        let both = p.eval(&Query::Grams(vec![1, 2]));
        assert!(both.has(0) && !both.has(5));
        let either = p.eval(&Query::Or(vec![
            Query::Grams(vec![2]),
            Query::Grams(vec![9]),
        ]));
        assert!(either.has(200) && either.has(0) && !either.has(5));
        assert!(matches(&Query::Grams(vec![1, 2]), &[1, 2, 3]));
        assert!(!matches(&Query::Grams(vec![4]), &[1, 2, 3]));
    }
}

//! Posting lists: for each trigram, the ids of the files holding it, delta- and varint-encoded.
//! Each walk thread fills its own shard (its ids only grow), so nothing is merged: a lookup ORs
//! the shards' lists into a bitset over file ids.

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
        let mut starts = Vec::with_capacity(keys.len() + 1);
        let total = self.lists.values().map(|(_, b)| b.len()).sum();
        let mut data = Vec::with_capacity(total);
        let mut lists = self.lists;
        for k in &keys {
            starts.push(data.len() as u64);
            if let Some((_, bytes)) = lists.remove(k) {
                data.extend_from_slice(&bytes);
            }
        }
        starts.push(data.len() as u64);
        Shard { keys, starts, data }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One thread's lists, frozen: sorted trigrams and their encoded ids in one buffer.
pub(crate) struct Shard {
    keys: Vec<u32>,
    starts: Vec<u64>,
    data: Vec<u8>,
}

impl Shard {
    fn or_into(&self, gram: u32, set: &mut Bits) {
        let Ok(i) = self.keys.binary_search(&gram) else {
            return;
        };
        let bytes = &self.data[self.starts[i] as usize..self.starts[i + 1] as usize];
        let (mut id, mut v, mut shift) = (0u32, 0u32, 0u32);
        for &b in bytes {
            v |= u32::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                id += v;
                set.set(id - 1);
                (v, shift) = (0, 0);
            } else {
                shift += 7;
            }
        }
    }

    pub(crate) fn memory(&self) -> usize {
        self.keys.capacity() * 4 + self.starts.capacity() * 8 + self.data.capacity()
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

//! One checkpoint on disk: every path of the workspace with its stamps and, for a file, the
//! chunks of its content (or why it has none). A small binary format of its own, written whole
//! to a temp and renamed, so a checkpoint is there complete or not at all.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::scan::{Kind, Stamp};
use crate::store::ChunkId;

const MAGIC: &[u8] = b"toolroute-checkpoint 1\n";

/// What a checkpoint holds of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A folder, or a path that is not restored (a FIFO, a socket).
    Nothing,
    /// A file's bytes, as chunks, and the digest of the whole.
    Stored {
        /// SHA-256 of the whole file.
        digest: ChunkId,
        /// Its chunks, in order.
        chunks: Vec<ChunkId>,
    },
    /// A link's target.
    Link(Vec<u8>),
    /// A file whose bytes were not kept; the reason, as a rewind reports it.
    Uncovered(String),
}

/// One path of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the workspace.
    pub path: PathBuf,
    /// Its stamps when the checkpoint was taken.
    pub stamp: Stamp,
    /// What was kept of it.
    pub content: Content,
}

/// A checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Its id (increasing within a store).
    pub id: u64,
    /// What the host called it.
    pub label: String,
    /// When it was taken (ns since the epoch).
    pub taken_ns: i128,
    /// Every path, in the scan's order.
    pub entries: Vec<Entry>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

impl Manifest {
    /// The on-disk form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.id.to_le_bytes());
        put_bytes(&mut out, self.label.as_bytes());
        out.extend_from_slice(&self.taken_ns.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for e in &self.entries {
            put_bytes(&mut out, e.path.as_os_str().as_bytes());
            let s = &e.stamp;
            out.push(match s.kind {
                Kind::File => 0,
                Kind::Link => 1,
                Kind::Dir => 2,
                Kind::Other => 3,
            });
            for v in [s.mode, s.uid, s.gid] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&s.size.to_le_bytes());
            out.extend_from_slice(&s.mtime_ns.to_le_bytes());
            out.extend_from_slice(&s.ctime_ns.to_le_bytes());
            out.extend_from_slice(&s.ino.to_le_bytes());
            match &e.content {
                Content::Nothing => out.push(0),
                Content::Stored { digest, chunks } => {
                    out.push(1);
                    out.extend_from_slice(digest);
                    out.extend_from_slice(&(chunks.len() as u64).to_le_bytes());
                    for c in chunks {
                        out.extend_from_slice(c);
                    }
                }
                Content::Link(target) => {
                    out.push(2);
                    put_bytes(&mut out, target);
                }
                Content::Uncovered(why) => {
                    out.push(3);
                    put_bytes(&mut out, why.as_bytes());
                }
            }
        }
        out
    }

    /// Read the on-disk form; a damaged or foreign file is an error, never a partial manifest.
    pub fn decode(bytes: &[u8]) -> io::Result<Self> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(bad("not a toolroute checkpoint"));
        }
        let id = r.u64()?;
        let label = r.string()?;
        let taken_ns = r.i128()?;
        let n = r.u64()?;
        let mut entries = Vec::with_capacity(n.min(1 << 20) as usize);
        for _ in 0..n {
            let path = PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?));
            let kind = match r.u8()? {
                0 => Kind::File,
                1 => Kind::Link,
                2 => Kind::Dir,
                3 => Kind::Other,
                _ => return Err(bad("unknown kind")),
            };
            let stamp = Stamp {
                kind,
                mode: r.u32()?,
                uid: r.u32()?,
                gid: r.u32()?,
                size: r.u64()?,
                mtime_ns: r.i128()?,
                ctime_ns: r.i128()?,
                ino: r.u64()?,
            };
            let content = match r.u8()? {
                0 => Content::Nothing,
                1 => {
                    let digest = r.id()?;
                    let k = r.u64()?;
                    let chunks = (0..k).map(|_| r.id()).collect::<io::Result<_>>()?;
                    Content::Stored { digest, chunks }
                }
                2 => Content::Link(r.bytes()?.to_vec()),
                3 => Content::Uncovered(r.string()?),
                _ => return Err(bad("unknown content")),
            };
            entries.push(Entry {
                path,
                stamp,
                content,
            });
        }
        if r.at != bytes.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(Manifest {
            id,
            label,
            taken_ns,
            entries,
        })
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("damaged checkpoint: {what}"),
    )
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| bad("truncated"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i128(&mut self) -> io::Result<i128> {
        Ok(i128::from_le_bytes(self.array()?))
    }
    fn id(&mut self) -> io::Result<ChunkId> {
        self.array()
    }
    fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = usize::try_from(self.u64()?).map_err(|_| bad("length"))?;
        self.take(n)
    }
    fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| bad("text"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let stamp = Stamp {
            kind: Kind::File,
            mode: 0o644,
            uid: 1,
            gid: 2,
            size: 3,
            mtime_ns: -4,
            ctime_ns: 5,
            ino: 6,
        };
        let m = Manifest {
            id: 7,
            label: "before".into(),
            taken_ns: 8,
            entries: vec![
                Entry {
                    path: "a/b".into(),
                    stamp,
                    content: Content::Stored {
                        digest: [1; 32],
                        chunks: vec![[2; 32], [3; 32]],
                    },
                },
                Entry {
                    path: "l".into(),
                    stamp: Stamp {
                        kind: Kind::Link,
                        ..stamp
                    },
                    content: Content::Link(b"a/b".to_vec()),
                },
                Entry {
                    path: "big".into(),
                    stamp,
                    content: Content::Uncovered("too large".into()),
                },
            ],
        };
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        for cut in [0, 10, bytes.len() - 1] {
            assert!(Manifest::decode(&bytes[..cut]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Manifest::decode(&longer).is_err());
    }
}

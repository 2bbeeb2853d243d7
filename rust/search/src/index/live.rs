//! One index's life: built in the background, kept fresh from the watcher's marks (applied
//! before each query, after the barrier) or by checking, with changed files folded back by a
//! background thread.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::build::{self, Facts, Ident};
use super::cache;
use super::key::{ident, Key};
use super::postings::Postings;
use super::snapshot::{self, Contents};
use super::state::{Over, Phase, State};
use super::tree::Tree;
use super::trigram::Extractor;
use super::validate;
use super::watch::{Mark, Watch};
use crate::walker::Walker;
use toolroute_files::Roots;

pub(crate) struct Index {
    pub(crate) key: Key,
    roots: Roots,
    pub(crate) state: Mutex<State>,
    /// Marks from the watcher (and the tools' own writes), applied before each query.
    pending: Arc<Mutex<Vec<Mark>>>,
    /// Set with the first `Broken` mark, so an index nobody queries still stops watching.
    doomed: Arc<AtomicBool>,
    watch: Mutex<Option<Arc<Watch>>>,
    ids: AtomicU32,
    /// Queries answered from the index.
    pub(crate) served: AtomicU64,
    pub(crate) last_used: Mutex<Instant>,
    /// Read back from the cache rather than built in this process.
    pub(crate) restored: bool,
    /// Bytes its contents hold, as last measured (read by the registry's budget without a lock).
    pub(crate) held: AtomicUsize,
    /// The next answer must check every folder and file first: a restored index, until the
    /// check has run, and again once its watch is up (changes made before the watch saw them).
    unverified: AtomicBool,
    /// The root folder's device and inode when the index was made: a walk beneath another
    /// folder since put at the same path is not answered from it.
    root_ident: Option<(u64, u64)>,
    /// The change count last written to the cache, and when.
    saved: Mutex<Option<(u64, Instant)>>,
}

/// How long a restored index's thread waits for the first query's check before watching.
const FIRST_CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// While changes keep coming, the cache is rewritten at most this often.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Give a re-listing's files their ids: a known path keeps its id, and its trigrams only if
/// it is the same file, not rewritten (an editor's save-by-rename, or another folder renamed
/// into its name, change the identity without a write event); anything else is dirty.
fn adopt(state: &mut State, built: &mut build::Built, old: &FxHashMap<PathBuf, u32>) {
    let idents: FxHashMap<u32, Ident> = built.facts.iter().map(|(id, f)| (*id, f.ident)).collect();
    let mut fresh_inodes = Vec::new();
    for (path, id) in built.listing.files.iter_mut() {
        let now = idents.get(id).copied();
        if let Some(&known) = old.get(path) {
            *id = known;
            if now.is_some() && now == state.ident(known) {
                continue;
            }
        } else {
            fresh_inodes.extend(now.map(|i| i.0));
        }
        state.mark_dirty(*id, path.clone());
    }
    // Files of the old listing that are not in the new one left the tree.
    let kept: rustc_hash::FxHashSet<u32> = built.listing.files.iter().map(|(_, id)| *id).collect();
    state.files_left(old.values().copied().filter(|id| !kept.contains(id)));
    // A new name for a file already indexed elsewhere in the tree (`ln`): a change through
    // either name reaches only that name's folder, so both are searched from disk from now on.
    if !fresh_inodes.is_empty() {
        state.distrust_inodes(&fresh_inodes);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Index {
    pub(crate) fn new(key: Key, roots: Roots) -> Arc<Self> {
        let state = State {
            phase: Phase::Building,
            tree: Tree::default(),
            postings: Postings {
                shards: Vec::new(),
                len: 0,
            },
            facts: Vec::new(),
            over: FxHashMap::default(),
            seq: 0,
            bytes: 0,
            build_time: None,
            texts: Default::default(),
        };
        Self::with_state(key, roots, state, 0, false)
    }

    /// An index from the cache: it answers only after checking every folder and file against
    /// the stamps it was saved with (and starts watching from its background thread).
    pub(crate) fn restore(key: Key, roots: Roots, contents: Contents) -> Arc<Self> {
        let next_id = contents.next_id;
        let state = contents.restored();
        let seq = state.seq;
        let index = Self::with_state(key, roots, state, next_id, true);
        // Due at once when its check finds changes: a short-lived process (a CLI call) should
        // leave the next one an index that is up to date, not the same files to re-read.
        let due = Instant::now()
            .checked_sub(SAVE_EVERY)
            .unwrap_or_else(Instant::now);
        *lock(&index.saved) = Some((seq, due));
        index
    }

    fn with_state(key: Key, roots: Roots, state: State, next_id: u32, restored: bool) -> Arc<Self> {
        let held = AtomicUsize::new(state.memory());
        let root_ident = rustix::fs::stat(&key.root).ok().map(|st| ident(&st));
        Arc::new(Self {
            root_ident,
            key,
            roots,
            state: Mutex::new(state),
            pending: Arc::new(Mutex::new(Vec::new())),
            doomed: Arc::new(AtomicBool::new(false)),
            watch: Mutex::new(None),
            ids: AtomicU32::new(next_id),
            served: AtomicU64::new(0),
            last_used: Mutex::new(Instant::now()),
            restored,
            held,
            unverified: AtomicBool::new(restored),
            saved: Mutex::new(None),
        })
    }

    /// The watch a built index starts before its walk; `None` when unwanted or unavailable.
    fn start_watch(&self) -> Option<Arc<Watch>> {
        let pending = Arc::clone(&self.pending);
        let doomed = Arc::clone(&self.doomed);
        let sink = Box::new(move |m: Mark| {
            if matches!(m, Mark::Broken(_)) {
                doomed.store(true, Ordering::Relaxed);
            }
            lock(&pending).push(m)
        });
        let wanted = super::config::IndexConfig::current().watch;
        wanted
            .then(|| Watch::start(&self.key.root, sink).ok())
            .flatten()
            .map(Arc::new)
    }

    /// A restored index's background start: watch every listed folder, then check everything
    /// once more (what changed before a folder was watched; here rather than in the next
    /// query), then trust the watch. The watches go in under the state lock, so a query's
    /// re-listing cannot add a folder between the two.
    pub(crate) fn watch_restored(&self) {
        // After the first answer's check, not beside it: adding thousands of watches holds the
        // state lock, which that answer would otherwise wait for.
        let until = Instant::now() + FIRST_CHECK_WAIT;
        while self.unverified.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.add_watches();
        drop(self.fresh());
    }

    fn add_watches(&self) {
        let Some(watch) = self.start_watch() else {
            return;
        };
        let state = lock(&self.state);
        if state.phase != Phase::Ready {
            return;
        }
        if state.tree.dirs.keys().any(|dir| watch.add(dir).is_err()) {
            return; // out of watches: checked before each answer, as without a watch
        }
        self.unverified.store(true, Ordering::SeqCst);
        *lock(&self.watch) = Some(watch);
        drop(state);
    }

    /// Write the index to the cache when it is whole (no file waiting to be re-read) and has
    /// changed since it was last written, at most every `SAVE_EVERY` (`force`: now, as it
    /// goes away).
    pub(crate) fn persist(&self, force: bool) {
        let body = {
            let state = lock(&self.state);
            let saved = *lock(&self.saved);
            let changed = saved.is_none_or(|(seq, _)| seq != state.seq);
            let due = force || saved.is_none_or(|(_, at)| at.elapsed() >= SAVE_EVERY);
            if state.phase != Phase::Ready || !changed || !due || state.dirty() > 0 {
                return;
            }
            *lock(&self.saved) = Some((state.seq, Instant::now()));
            let mut body = snapshot::Enc::default();
            snapshot::encode(&state, self.ids.load(Ordering::Relaxed), &mut body);
            body
        };
        cache::save(&self.key, body);
    }

    /// Folders watched (with the barrier's and `.git` rule folders).
    pub(crate) fn watched(&self) -> usize {
        lock(&self.watch).as_ref().map_or(0, |w| w.watched())
    }

    /// Whether this index is of the folder `root` is open on.
    pub(crate) fn indexes(&self, root: std::os::fd::BorrowedFd<'_>) -> bool {
        let now = rustix::fs::fstat(root).map(|st| ident(&st));
        now.is_ok_and(|now| Some(now) == self.root_ident)
    }

    pub(crate) fn phase(&self) -> Phase {
        lock(&self.state).phase.clone()
    }

    /// Build on the calling (background) thread; the watch starts first so nothing that
    /// changes during the walk goes unseen. Without a watch (`TOOLROUTE_SEARCH_INDEX_WATCH=0`,
    /// no inotify, out of watches) the index is checked before each answer instead.
    pub(crate) fn build(&self) {
        let began = Instant::now();
        let watch = self.start_watch();
        *lock(&self.watch) = watch.clone();
        let opts = self.key.walk_options();
        let Some(built) = build::walk(
            &self.roots,
            &self.key.root,
            opts,
            watch.as_ref(),
            &self.ids,
            build::Depth::Build,
        ) else {
            return self.give_up(Phase::Unusable("the walk met errors".into()));
        };
        if built.unwatched {
            self.stop_watching();
        }
        let len = self.ids.load(Ordering::Relaxed);
        let mut facts = vec![Facts::default(); len as usize];
        for (id, f) in built.facts {
            facts[id as usize] = f;
        }
        let mut state = lock(&self.state);
        if state.phase != Phase::Building {
            return;
        }
        state.tree.insert(Path::new(""), built.listing);
        state.postings = Postings {
            shards: built.shards,
            len,
        };
        state.facts = facts;
        state.bytes = built.bytes;
        state.build_time = Some(began.elapsed());
        state.phase = Phase::Ready;
        self.held.store(state.memory(), Ordering::Relaxed);
    }

    pub(crate) fn watching(&self) -> bool {
        lock(&self.watch).is_some()
    }

    fn give_up(&self, phase: Phase) {
        lock(&self.state).phase = phase;
        self.stop_watching();
    }

    /// Whether the watcher saw a change the index cannot follow; marks it broken if so.
    pub(crate) fn doomed(&self) -> bool {
        let doomed = self.doomed.load(Ordering::Relaxed);
        if doomed {
            let mut state = lock(&self.state);
            if state.phase == Phase::Ready || state.phase == Phase::Building {
                state.phase =
                    Phase::Broken("the watcher reported a change it cannot follow".into());
            }
        }
        doomed
    }

    pub(crate) fn stop_watching(&self) {
        *lock(&self.watch) = None;
    }

    /// A path written by the tools themselves (absolute): searched fresh on the next query.
    pub(crate) fn touched(&self, abs: &Path) {
        let Ok(rel) = abs.strip_prefix(&self.key.root) else {
            return;
        };
        // A new file needs its folder listed again; a known one only a fresh read.
        let known = lock(&self.state).tree.id(rel).is_some();
        let mut pending = lock(&self.pending);
        match (known, rel.parent()) {
            (false, Some(parent)) => pending.push(Mark::Entries(parent.to_path_buf())),
            _ => pending.push(Mark::Dirty(rel.to_path_buf())),
        }
    }

    /// Bring the index up to date with every change made before this call; the state, locked,
    /// when it can answer. With the watch, a barrier makes sure its events are in; without it
    /// (or once it lost events), every folder and file is checked.
    pub(crate) fn fresh(&self) -> Option<MutexGuard<'_, State>> {
        let mut watch = lock(&self.watch).clone();
        if watch.as_ref().is_some_and(|w| !w.barrier()) {
            self.stop_watching();
            watch = None;
        }
        let mut state = lock(&self.state);
        if state.phase != Phase::Ready {
            return None;
        }
        let verify = self.unverified.swap(false, Ordering::SeqCst);
        if verify {
            // The watch `watch_restored` put in place with this flag (or none yet).
            watch = lock(&self.watch).clone();
        }
        let mut marks = std::mem::take(&mut *lock(&self.pending));
        if marks.iter().any(|m| matches!(m, Mark::Lost)) {
            self.stop_watching();
            watch = None;
        }
        if watch.is_none() || verify {
            let Some(found) = self.check(&state) else {
                if verify {
                    state.phase = Phase::Broken("the root cannot be opened to check it".into());
                }
                return None;
            };
            marks.extend(found);
        }
        if let Err(why) = self.apply(&mut state, marks, watch.as_ref()) {
            state.phase = Phase::Broken(why);
            return None;
        }
        *lock(&self.last_used) = Instant::now();
        Some(state)
    }

    /// The root, as a handle to look up and open beneath (checks and re-reads start there).
    fn open_root(&self) -> Option<std::os::fd::OwnedFd> {
        rustix::fs::open(
            &self.key.root,
            toolroute_files::handle_flags()
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .ok()
    }

    /// What changed, found by looking at every listed folder and indexed file.
    fn check(&self, state: &State) -> Option<Vec<Mark>> {
        let root = self.open_root()?;
        Some(validate::check(&root, &state.tree, |id| state.ident(id)))
    }

    fn apply(
        &self,
        state: &mut State,
        marks: Vec<Mark>,
        watch: Option<&Arc<Watch>>,
    ) -> Result<(), String> {
        let mut relist: Vec<PathBuf> = Vec::new();
        let mut entries: Vec<PathBuf> = Vec::new();
        let mut dirty: Vec<PathBuf> = Vec::new();
        for mark in marks {
            match mark {
                Mark::Broken(why) => return Err(why),
                Mark::Lost => {}
                Mark::Relist(d) => relist.push(d),
                Mark::Entries(d) => entries.push(d),
                Mark::Dirty(p) => dirty.push(p),
            }
        }
        // Parents first: a folder a parent's listing dropped is skipped, one it found new was
        // walked whole.
        entries.sort();
        entries.dedup();
        for dir in entries {
            if state.tree.dirs.contains_key(&dir) {
                self.entries(state, &dir, watch)?;
            }
        }
        // Outermost first; a folder below one already re-listed is covered by it.
        relist.sort();
        relist.dedup();
        let mut done: Vec<PathBuf> = Vec::new();
        for dir in relist {
            if done.iter().any(|d| dir.starts_with(d)) || !state.tree.dirs.contains_key(&dir) {
                continue;
            }
            self.relist(state, &dir, watch)?;
            done.push(dir);
        }
        for path in dirty {
            if let Some(id) = state.tree.id(&path) {
                state.mark_dirty(id, path);
            }
        }
        Ok(())
    }

    /// List `dir` and everything below it again (with the same rules).
    fn relist(
        &self,
        state: &mut State,
        dir: &Path,
        watch: Option<&Arc<Watch>>,
    ) -> Result<(), String> {
        let mut built = self.walk(dir, watch, build::Depth::Tree)?;
        let old = state.tree.remove(dir);
        adopt(state, &mut built, &old);
        state.tree.insert(dir, built.listing);
        Ok(())
    }

    /// List `dir`'s own entries again: its files and skipped entries are replaced, subfolders
    /// gone are dropped, new ones are walked whole, the others keep their listings.
    fn entries(
        &self,
        state: &mut State,
        dir: &Path,
        watch: Option<&Arc<Watch>>,
    ) -> Result<(), String> {
        let mut built = self.walk(dir, watch, build::Depth::Entries)?;
        let old = state.tree.own_files(dir);
        let before = state.tree.subdirs(dir);
        adopt(state, &mut built, &old);
        let after = built.listing.subdirs.clone();
        for gone in before.iter().filter(|d| !after.contains(d)) {
            let files = state.tree.remove(gone);
            state.files_left(files.into_values());
        }
        state.tree.replace_entries(dir, built.listing);
        for new in after.iter().filter(|d| !before.contains(d)) {
            self.relist(state, new, watch)?;
        }
        Ok(())
    }

    fn walk(
        &self,
        dir: &Path,
        watch: Option<&Arc<Watch>>,
        depth: build::Depth,
    ) -> Result<build::Built, String> {
        let abs = self.key.root.join(dir);
        let opts = self.key.walk_options();
        build::walk(&self.roots, &abs, opts, watch, &self.ids, depth)
            .ok_or_else(|| format!("re-listing {dir:?} failed"))
    }

    /// Keep the texts a query read whole, unless anything changed since its check (`seen` is
    /// the change count it saw): a change found since may have been re-read already, and what
    /// the query read is then older than what the index holds.
    pub(crate) fn keep_texts(&self, seen: u64, read: Vec<(u32, Vec<u8>)>) {
        if read.is_empty() {
            return;
        }
        let mut state = lock(&self.state);
        if state.seq != seen || state.phase != Phase::Ready {
            return;
        }
        let added: usize = read
            .into_iter()
            .map(|(id, text)| state.texts.learn(id, text))
            .sum();
        self.held.fetch_add(added, Ordering::Relaxed);
    }

    /// Re-read some dirty files (off the lock) and fold their trigrams back in.
    pub(crate) fn fold(&self, most: usize) -> usize {
        let todo: Vec<(u32, u64, PathBuf)> = {
            let state = lock(&self.state);
            state
                .over
                .iter()
                .filter_map(|(&id, o)| match o {
                    Over::Dirty { seq, path } => Some((id, *seq, path.clone())),
                    Over::Folded { .. } => None,
                })
                .take(most)
                .collect()
        };
        if todo.is_empty() {
            return 0;
        }
        let Some(root) = self.open_root() else {
            return 0;
        };
        let mut extractor = Extractor::new();
        let mut read = Vec::new();
        let mut twins = Vec::new();
        for (id, seq, path) in todo {
            let Ok(mut file) = Walker::reopen(&root, &path, false) else {
                continue;
            };
            let Ok(meta) = file.metadata() else {
                continue;
            };
            let (ident, linked) = (build::ident_of(&meta), build::linked(&meta));
            let Ok(grams) = extractor.read(&mut (&mut file).take(build::MAX_INDEXED)) else {
                continue;
            };
            let facts = Facts {
                has_nul: grams.has_nul,
                unsure: grams.unsure || linked || ident.1 >= build::MAX_INDEXED,
                ident,
            };
            if linked {
                twins.push(ident.0);
            }
            read.push((id, seq, grams.grams.into_boxed_slice(), facts));
        }
        let mut state = lock(&self.state);
        // A file given another name since it was read (`ln` elsewhere in the tree): its other
        // names are searched from now on too, as a change through one reaches only its folder.
        if !twins.is_empty() {
            state.distrust_inodes(&twins);
        }
        let n = read.len();
        for (id, seq, grams, facts) in read {
            if matches!(state.over.get(&id), Some(Over::Dirty { seq: s, .. }) if *s == seq) {
                state.over.insert(id, Over::Folded { grams, facts });
                state.texts.forget(id);
            }
        }
        self.held.store(state.memory(), Ordering::Relaxed);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text read before a change that was found and re-read while the query ran is older than
    /// what the index holds: it must not be kept.
    #[test]
    fn a_text_read_before_a_change_found_meanwhile_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let file = ws.join("a.txt");
        std::fs::write(&file, "old words\n").unwrap();
        let ws = ws.canonicalize().unwrap();
        let roots = Roots::new(&ws, &[]).unwrap();
        let key = Key {
            root: ws.clone(),
            hidden: false,
            no_ignore: false,
            require_git: false,
        };
        let index = Index::new(key, roots);
        index.build();
        let (seen, id) = {
            let state = index.fresh().expect("ready");
            (state.seq, state.tree.id(Path::new("a.txt")).unwrap())
        };
        // The query has read "old words"; meanwhile the file changes, another query's check
        // finds it, and it is re-read.
        std::fs::write(&file, "new words\n").unwrap();
        index.touched(&ws.join("a.txt"));
        drop(index.fresh().expect("ready"));
        assert_eq!(index.fold(10), 1);
        index.keep_texts(seen, vec![(id, b"old words\n".to_vec())]);
        assert_eq!(lock(&index.state).texts.bytes(), 0);
        // Read with nothing changed since the check: kept.
        let now = lock(&index.state).seq;
        index.keep_texts(now, vec![(id, b"new words\n".to_vec())]);
        assert_eq!(lock(&index.state).texts.text(id), Some(&b"new words\n"[..]));
    }

    /// Files made and removed again (an agent's scratch files, a build's outputs) leave nothing
    /// behind in a long-lived index, and never hold up the folding of files still there.
    #[test]
    fn files_that_come_and_go_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "kept\n").unwrap();
        let ws = ws.canonicalize().unwrap();
        let roots = Roots::new(&ws, &[]).unwrap();
        let key = Key {
            root: ws.clone(),
            hidden: false,
            no_ignore: false,
            require_git: false,
        };
        let index = Index::new(key, roots);
        index.build();
        for round in 0..5 {
            let names: Vec<String> = (0..20).map(|i| format!("tmp-{round}-{i}.txt")).collect();
            for name in &names {
                std::fs::write(ws.join(name), "scratch\n").unwrap();
                index.touched(&ws.join(name));
            }
            assert!(index.fresh().expect("ready").over.len() >= 20);
            for name in &names {
                std::fs::remove_file(ws.join(name)).unwrap();
                index.touched(&ws.join(name));
            }
            drop(index.fresh().expect("ready"));
            assert_eq!(lock(&index.state).over.len(), 0, "round {round}");
        }
        // A change to a file still there is folded at once, none of the gone ones in its way.
        std::fs::write(ws.join("a.txt"), "changed\n").unwrap();
        index.touched(&ws.join("a.txt"));
        drop(index.fresh().expect("ready"));
        assert_eq!(index.fold(1), 1);
        assert_eq!(lock(&index.state).dirty(), 0);
    }
}

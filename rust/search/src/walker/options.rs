//! What a walk visits: the caller's options (`WalkOptions`) and the glob and type filters
//! compiled from them (`Filters`), with the fixed rules on names (version-control folders, hidden
//! entries) that every walk applies.

use std::path::Path;

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};

use crate::SearchError;

/// Version-control metadata directories: never searched, even with `hidden`.
const VCS_DIRS: [&str; 6] = [".git", ".hg", ".svn", ".bzr", ".jj", ".sl"];

/// What a walk visits: the ignore rules, globs and types, links and depth.
#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    /// Include hidden (dot) files and directories.
    pub hidden: bool,
    /// Ignore .gitignore, .ignore, .git/info/exclude and git's global excludes.
    pub no_ignore: bool,
    /// Apply .gitignore only inside a git repository (ripgrep's default). toolroute's tools pass
    /// `false`: a .gitignore is honoured wherever it is, see docs/search.md.
    pub require_git: bool,
    /// rg-style globs; `!glob` excludes. Matched relative to the start path, or to the workspace
    /// root with `globs_from_workspace` (rg's `-g` run from the workspace root).
    pub globs: Vec<String>,
    /// Match the globs relative to the workspace root instead of the start path.
    pub globs_from_workspace: bool,
    /// ripgrep file type names (`py`, `rust`...); `!name` excludes the type. A file a glob
    /// selects is kept whatever its type (as in ripgrep).
    pub types: Vec<String>,
    /// Follow symlinks; each is resolved beneath the root it was found in.
    pub follow_symlinks: bool,
    /// Most worker threads; 0 picks the number of CPUs (at most 12, like ripgrep).
    pub threads: usize,
}

/// The caller's glob and type filters, applied after the ignore rules.
#[derive(Clone)]
pub(super) struct Filters {
    globs: Override,
    types: Types,
    /// Some glob is a `!` exclusion: only those can reject a directory (types never do).
    pub(super) excludes: bool,
}

impl Filters {
    /// The options' globs and types, compiled (an invalid glob or unknown type is refused).
    pub(super) fn compile(opts: &WalkOptions) -> Result<Self, SearchError> {
        let globs = build_filter(&opts.globs)?;
        let types = build_types(&opts.types)?;
        let excludes = globs.num_ignores() > 0;
        Ok(Self {
            globs,
            types,
            excludes,
        })
    }

    /// ripgrep's order: a glob that matches decides (an excluding one rejects, a selecting one
    /// keeps the file whatever its type); otherwise the type filter decides.
    pub(super) fn rejects(&self, path: &Path, is_dir: bool) -> bool {
        if is_dir && !self.excludes {
            return false;
        }
        let by_glob = self.globs.matched(path, is_dir);
        if by_glob.is_ignore() {
            return true;
        }
        !by_glob.is_whitelist() && self.types.matched(path, is_dir).is_ignore()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.globs.is_empty() && self.types.is_empty()
    }
}

pub(super) fn is_vcs_dir(name: &[u8]) -> bool {
    VCS_DIRS.iter().any(|v| name == v.as_bytes())
}

pub(super) fn is_hidden(name: &[u8]) -> bool {
    name.first() == Some(&b'.')
}

fn build_filter(globs: &[String]) -> Result<Override, SearchError> {
    // Matched against relative paths (see `Walker::admit`), so the root is empty.
    let mut builder = OverrideBuilder::new("");
    for glob in globs {
        builder.add(glob).map_err(|e| SearchError::Glob {
            glob: glob.clone(),
            reason: e.to_string(),
        })?;
    }
    builder.build().map_err(|e| SearchError::Glob {
        glob: globs.join(" "),
        reason: e.to_string(),
    })
}

fn build_types(names: &[String]) -> Result<Types, SearchError> {
    if names.is_empty() {
        // Building the ~150 default definitions costs more than a small walk.
        return Ok(Types::empty());
    }
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    for name in names {
        match name.strip_prefix('!') {
            Some(negated) => builder.negate(negated),
            None => builder.select(name),
        };
    }
    builder.build().map_err(|e| {
        let known: Vec<String> = TypesBuilder::new()
            .add_defaults()
            .definitions()
            .iter()
            .map(|d| d.name().to_string())
            .collect();
        let hint = names
            .iter()
            .filter_map(|n| {
                let n = n.trim_start_matches('!');
                known
                    .iter()
                    .filter(|k| strsim::jaro_winkler(k, n) > 0.85)
                    .max_by(|a, b| {
                        strsim::jaro_winkler(a, n).total_cmp(&strsim::jaro_winkler(b, n))
                    })
                    .cloned()
            })
            .collect::<Vec<_>>();
        let mut message = format!(
            "{e} (file types are ripgrep's names, e.g. py, rust, js, ts, go, java, c, cpp, md)"
        );
        if !hint.is_empty() {
            message.push_str(&format!("; did you mean {}?", hint.join(", ")));
        }
        SearchError::Type(message)
    })
}

pub(super) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(12))
}

//! Build provenance (SPEC V1), found at build time: the commit a binary is built from, whether
//! its sources differ from that commit, and its class: `release` only for a clean build of the
//! commit tagged with the package's version, `source` otherwise.
//!
//! The build scripts of `refine-guardian` and `refine-supervisor` call [`emit`], which asks
//! `git` (never the network) and hands the answer to the compiler as environment variables:
//!
//! | variable | value |
//! |---|---|
//! | `REFINE_BUILD_COMMIT` | the full hex commit id, or empty: unknown |
//! | `REFINE_BUILD_DIRTY` | `true`, `false` or `unknown` |
//! | `REFINE_BUILD_CLASS` | `release` or `source` |
//!
//! The binary reads them with `env!` (`refine_protocol_core::provenance` turns them into the
//! fixed bytes the guardian carries).
//!
//! # The rules
//! - **Which repository.** Only the one whose work tree is the workspace itself: a tarball
//!   unpacked inside another checkout is a build outside git, and says `unknown`, never the
//!   other checkout's commit.
//! - **Dirty** means a file this binary is built from (the package's folder, the protocol it
//!   compiles, the workspace's `Cargo.toml` and `Cargo.lock`) differs from the commit: modified,
//!   staged, deleted, or untracked and not ignored. A change elsewhere (a README) leaves the
//!   binary what the commit builds, and the flag says so.
//! - **Release** needs a known clean tree and a tag at `HEAD` named `v<version>` or `<version>`
//!   (the package's version); anything else is `source`, an unknown tree included.
//! - **Unknown** whenever `git` is missing, fails (no repository, a repository it refuses to
//!   read as this user) or answers something that is not a commit id.
//!
//! # Caveats
//! Cargo reruns a build script only when a path it named changed: [`emit`] names the
//! repository's `HEAD`, the branch it points at, `packed-refs`, the tags, the index, and the
//! source paths above, so a commit, a checkout, a tag, `git add` or an edit of a source file
//! reruns it. `git status` runs with `--no-optional-locks`, so it never rewrites the index it
//! watches.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A build's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A clean build of the commit tagged with the package's version.
    Release,
    /// Anything else: untagged, tagged with another version, dirty, or not known to be clean.
    Source,
}

impl Class {
    /// The class's one name (`release`, `source`).
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Release => "release",
            Class::Source => "source",
        }
    }
}

/// The class of a build of `version` whose `HEAD` carries `tags`, with a tree that is `dirty`
/// (`None`: not known). Pure: the rule, and nothing else.
pub fn classify<'a>(
    version: &str,
    tags: impl IntoIterator<Item = &'a str>,
    dirty: Option<bool>,
) -> Class {
    if dirty != Some(false) || version.is_empty() {
        return Class::Source;
    }
    let tagged = tags
        .into_iter()
        .any(|t| t == version || t.strip_prefix('v') == Some(version));
    if tagged {
        Class::Release
    } else {
        Class::Source
    }
}

/// What `git` says of a workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// The commit at `HEAD` (40 or 64 lowercase hex digits); `None`: unknown.
    pub commit: Option<String>,
    /// Whether a source path differs from that commit; `None`: unknown.
    pub dirty: Option<bool>,
    /// The tags that point at `HEAD`.
    pub tags: Vec<String>,
    /// The repository's files whose change can change the answer (for `rerun-if-changed`).
    pub watch: Vec<PathBuf>,
}

/// Asks `git` about the workspace at `workspace`, whose binary is built from `sources` (paths
/// relative to it). Never fails: what cannot be known is `None`.
pub fn probe(workspace: &Path, sources: &[&str]) -> Probe {
    let Ok(root) = workspace.canonicalize() else {
        return Probe::default();
    };
    let Some(out) = git(
        &root,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
            "HEAD",
        ],
    ) else {
        return Probe::default();
    };
    let lines: Vec<&str> = out.lines().collect();
    let [top, git_dir, common, head] = lines[..] else {
        return Probe::default();
    };
    // A tarball inside another checkout is not that checkout's commit.
    if Path::new(top).canonicalize().ok().as_deref() != Some(root.as_path()) {
        return Probe::default();
    }
    let Some(commit) = commit_id(head) else {
        return Probe::default();
    };
    let (git_dir, common) = (PathBuf::from(git_dir), PathBuf::from(common));
    let mut status = vec![
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=normal",
        "--",
    ];
    status.extend_from_slice(sources);
    let dirty = git(&root, &status).map(|s| !s.trim().is_empty());
    let tags = git(&root, &["tag", "--points-at", "HEAD"])
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    Probe {
        commit: Some(commit),
        dirty,
        tags,
        watch: watched(&git_dir, &common),
    }
}

/// `HEAD`, the branch it names, `packed-refs`, the tags and the index: those that exist (cargo
/// reruns a script at every build for a path that does not).
fn watched(git_dir: &Path, common: &Path) -> Vec<PathBuf> {
    let head = git_dir.join("HEAD");
    let mut paths = vec![head.clone(), git_dir.join("index")];
    if let Ok(text) = std::fs::read_to_string(&head) {
        if let Some(name) = text.trim().strip_prefix("ref: ") {
            // Branches live in the common directory (shared by every worktree).
            paths.push(common.join(name));
            paths.push(git_dir.join(name));
        }
    }
    paths.push(common.join("packed-refs"));
    paths.push(common.join("refs/tags"));
    paths.retain(|p| p.exists());
    paths.sort();
    paths.dedup();
    paths
}

/// A commit id as `git` prints one: SHA-1 or SHA-256, lowercase hex.
fn commit_id(text: &str) -> Option<String> {
    let ok = matches!(text.len(), 40 | 64)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| text.to_owned())
}

/// `git -C dir ARGS`, its stdout when it succeeds. The caller's git redirection (`GIT_DIR`,
/// ... as a hook sets them) is removed: the question is about `dir`'s own repository.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_CEILING_DIRECTORIES",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.stderr(std::process::Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout)
        .ok()
        .map(|s| s.trim_end().to_owned())
}

/// For a build script: probes the workspace at `workspace` (the package's sources `sources`,
/// relative to it) and prints the `cargo:` lines that give the compiler the answer for a
/// package of `version`, and rerun the script when it can change.
pub fn emit(version: &str, workspace: &Path, sources: &[&str]) {
    let p = probe(workspace, sources);
    let class = classify(version, p.tags.iter().map(String::as_str), p.dirty);
    println!(
        "cargo:rustc-env=REFINE_BUILD_COMMIT={}",
        p.commit.as_deref().unwrap_or("")
    );
    let dirty = match p.dirty {
        Some(true) => "true",
        Some(false) => "false",
        None => "unknown",
    };
    println!("cargo:rustc-env=REFINE_BUILD_DIRTY={dirty}");
    println!("cargo:rustc-env=REFINE_BUILD_CLASS={}", class.as_str());
    for path in p.watch {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    for s in sources {
        let path = workspace.join(s);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_needs_a_clean_tree_and_the_version_tag() {
        assert_eq!(classify("0.1.0", ["v0.1.0"], Some(false)), Class::Release);
        assert_eq!(classify("0.1.0", ["0.1.0"], Some(false)), Class::Release);
        assert_eq!(
            classify("0.1.0", ["other", "v0.1.0"], Some(false)),
            Class::Release
        );
        // Dirty or not known to be clean.
        assert_eq!(classify("0.1.0", ["v0.1.0"], Some(true)), Class::Source);
        assert_eq!(classify("0.1.0", ["v0.1.0"], None), Class::Source);
        // Another version's tag, a tag that only contains the version, none.
        assert_eq!(classify("0.1.0", ["v0.1.1"], Some(false)), Class::Source);
        assert_eq!(
            classify("0.1.0", ["v0.1.0-rc1"], Some(false)),
            Class::Source
        );
        assert_eq!(classify("0.1.0", ["x0.1.0"], Some(false)), Class::Source);
        assert_eq!(classify("0.1.0", ["vv0.1.0"], Some(false)), Class::Source);
        assert_eq!(classify("0.1.0", [], Some(false)), Class::Source);
        assert_eq!(classify("", [""], Some(false)), Class::Source);
    }

    #[test]
    fn a_commit_id_is_forty_or_sixty_four_lowercase_hex_digits() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(commit_id(sha1).as_deref(), Some(sha1));
        assert!(commit_id(&"a".repeat(64)).is_some());
        assert!(commit_id(&sha1.to_uppercase()).is_none());
        assert!(commit_id(&sha1[..39]).is_none());
        assert!(commit_id("HEAD").is_none());
        assert!(commit_id(&format!("{}\u{1b}", &sha1[..39])).is_none());
    }

    fn have_git() -> bool {
        let ok = Command::new("git")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("skipped: no git on PATH");
        }
        ok
    }

    fn run_git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"])
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// A workspace in a repository of its own: `src/` is the package, `README` is not.
    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(dir.path().join("README"), "hi\n").unwrap();
        run_git(dir.path(), &["init", "-q"]);
        run_git(dir.path(), &["add", "."]);
        run_git(dir.path(), &["commit", "-q", "-m", "one"]);
        dir
    }

    fn head(dir: &Path) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[test]
    fn a_clean_tagged_checkout_is_a_release_and_an_edit_makes_it_a_source_build() {
        if !have_git() {
            return;
        }
        let r = repo();
        let p = probe(r.path(), &["src"]);
        assert_eq!(p.commit.as_deref(), Some(head(r.path()).as_str()));
        assert_eq!(p.dirty, Some(false));
        assert_eq!(
            classify("1.2.3", p.tags.iter().map(String::as_str), p.dirty),
            Class::Source
        );
        assert!(p.watch.iter().any(|w| w.ends_with("HEAD")), "{p:?}");
        assert!(p.watch.iter().any(|w| w.ends_with("index")), "{p:?}");

        run_git(r.path(), &["tag", "v1.2.3"]);
        let p = probe(r.path(), &["src"]);
        assert_eq!(p.tags, ["v1.2.3"]);
        assert_eq!(
            classify("1.2.3", p.tags.iter().map(String::as_str), p.dirty),
            Class::Release
        );
        assert!(p.watch.iter().any(|w| w.ends_with("refs/tags")), "{p:?}");

        // Outside the sources: still what the commit builds.
        std::fs::write(r.path().join("README"), "changed\n").unwrap();
        assert_eq!(probe(r.path(), &["src"]).dirty, Some(false));
        // A source edited, or a new untracked source file: dirty.
        std::fs::write(r.path().join("src/main.rs"), "fn main() { }\n").unwrap();
        let p = probe(r.path(), &["src"]);
        assert_eq!(p.dirty, Some(true));
        assert_eq!(
            classify("1.2.3", p.tags.iter().map(String::as_str), p.dirty),
            Class::Source
        );
        run_git(r.path(), &["checkout", "-q", "--", "src/main.rs"]);
        assert_eq!(probe(r.path(), &["src"]).dirty, Some(false));
        std::fs::write(r.path().join("src/new.rs"), "\n").unwrap();
        assert_eq!(probe(r.path(), &["src"]).dirty, Some(true));
    }

    #[test]
    fn outside_git_everything_is_unknown() {
        if !have_git() {
            return;
        }
        let plain = tempfile::tempdir().unwrap();
        assert_eq!(probe(plain.path(), &["src"]), Probe::default());
        // A workspace unpacked inside another repository is not that repository's commit.
        let r = repo();
        let inner = r.path().join("src");
        assert_eq!(probe(&inner, &["."]), Probe::default());
        assert_eq!(
            probe(Path::new("/nonexistent/x"), &["src"]),
            Probe::default()
        );
    }
}

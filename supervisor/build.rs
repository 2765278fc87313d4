//! Link settings for the `refine-supervisor` binary: static on glibc targets, so that a `run`
//! does not pay the dynamic loader. Loading libc, libm and libgcc_s, relocating and binding
//! them was the largest part of what the CLI did before its guardian is spawned
//! (`scripts/bench-launch` measures it; figures in `scripts/README.md`).
//!
//! This is what `-C target-feature=+crt-static` gives a binary, but cargo cannot give that flag
//! to one binary of a workspace: in a build for the host it would also reach the proc-macros,
//! which cannot be linked statically. So the build script gives the link the same thing:
//! `-static` (and `-no-pie`, below), and a search directory in which every system library the
//! standard library asks for (`-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`) is a linker script naming its static
//! archive (`libgcc_s` becomes `libgcc_eh` + `libgcc`, as crt-static links it). `-L` applies to
//! every `-l` of the link wherever it stands, and comes before the system directories.
//!
//! Only the binary is linked so: the library, and the tests and tools that link it, stay
//! dynamic. Where a static archive is missing (no `libc.a`: e.g. without the C library's
//! development package), the binary is linked dynamically as before, with a build warning.
//!
//! It also tells the library where this build's binaries land (`REFINE_PROFILE_DIR`, the
//! `target/<profile>` directory), so its doc examples find the workspace's `refine-guardian`
//! (another package's binary) when they do not run beside it
//! (`refine_supervisor::host::built_guardian`).
//!
//! And it finds the build's provenance (V1: commit, dirty flag, class; `refine-build-info`),
//! which `src/provenance.rs` reads with `env!`: the sources are this package's folder, the
//! protocol it compiles (`protocol/`, the core and the build-info crate included), and the
//! workspace's manifest and lock file.
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries the standard library links on linux-gnu, and the static archives that stand
/// for each of them in a static link.
const LIBS: [(&str, &[&str]); 7] = [
    ("gcc_s", &["libgcc_eh.a", "libgcc.a"]),
    ("util", &["libutil.a"]),
    ("rt", &["librt.a"]),
    ("pthread", &["libpthread.a"]),
    ("m", &["libm.a"]),
    ("dl", &["libdl.a"]),
    ("c", &["libc.a", "libgcc_eh.a", "libgcc.a"]),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // OUT_DIR is `<profile dir>/build/<package>-<hash>/out`.
    let out_dir = PathBuf::from(var("OUT_DIR"));
    let profile = out_dir.ancestors().nth(3).unwrap_or(&out_dir);
    println!("cargo:rustc-env=REFINE_PROFILE_DIR={}", profile.display());
    let manifest = PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let workspace = manifest.parent().unwrap_or(&manifest);
    refine_build_info::emit(
        &var("CARGO_PKG_VERSION"),
        workspace,
        &["supervisor", "protocol", "Cargo.toml", "Cargo.lock"],
    );
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    // The C compiler is asked where the archives are: only meaningful for the host's own target.
    if !linux_gnu || var("HOST") != var("TARGET") {
        return;
    }
    let out = PathBuf::from(var("OUT_DIR")).join("static-libs");
    match shadow_libraries(&out) {
        Ok(()) => {
            // Not position-independent: a static PIE relocates itself at every start, and
            // that dirtied pages on every run (a visible share of a launch's page faults). The
            // guardian, tini-static and catatonit are linked the same way; the cost is that the
            // executable's own image is not randomized (stack, heap and mappings still are).
            println!("cargo:rustc-link-arg-bin=refine-supervisor=-static");
            println!("cargo:rustc-link-arg-bin=refine-supervisor=-no-pie");
            // The code a launch executes, gathered at the start of the text (see
            // `scripts/hot-text`, which writes the list): a run maps a few windows of it
            // instead of many scattered over the whole binary.
            let hot = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("hot-text.ld");
            println!("cargo:rerun-if-changed={}", hot.display());
            if hot.exists() {
                println!(
                    "cargo:rustc-link-arg-bin=refine-supervisor=-Wl,-T,{}",
                    hot.display()
                );
            }
            println!(
                "cargo:rustc-link-arg-bin=refine-supervisor=-L{}",
                out.display()
            );
        }
        Err(why) => println!(
            "cargo:warning=refine-supervisor is linked dynamically (slower start-up): {why}"
        ),
    }
}

/// Writes `lib<name>.so` linker scripts into `dir`, each naming the static archives of
/// [`LIBS`]; fails if the compiler does not know one of them.
fn shadow_libraries(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, archives) in LIBS {
        let mut paths = Vec::with_capacity(archives.len());
        for a in archives {
            paths.push(format!("\"{}\"", archive(a)?.display()));
        }
        let script = format!("GROUP ( {} )\n", paths.join(" "));
        let file = dir.join(format!("lib{name}.so"));
        std::fs::write(&file, script)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(())
}

/// Where the C compiler finds `name`; `cc -print-file-name` echoes the bare name when it has
/// none.
fn archive(name: &str) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !path.is_absolute() || !path.is_file() {
        return Err(format!("{cc} knows no static {name}"));
    }
    Ok(path)
}

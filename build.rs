//! Build script:
//! * the cdylib gets libfabric's symbol versions (capi/libfabric.map) and
//!   `-Bsymbolic`, so it can stand in for libfabric.so.1 and, loaded as a
//!   provider by the real core, never binds its own calls to the core's copies;
//! * capi/c/varargs.c (the two variadic core functions stable Rust cannot
//!   define) is compiled with the system C compiler and linked into the cdylib
//!   only;
//! * include/rsverbs.h is generated from capi/embed.rs by cbindgen;
//! * the build's identity: `RSVERBS_COMMIT` (the git commit the library is
//!   built from, `-dirty` when src/, capi/, fi/, build.rs or the Cargo files differ
//!   from it; from the environment variable `RSVERBS_COMMIT` when set, e.g.
//!   by a package build from a source tarball; `unknown` outside a git tree),
//!   shown by `rsverbs_version()`, `fi_tostr(FI_TYPE_VERSION)` and the
//!   `driver` of every info's nic (`fi_info -v`).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let map = root.join("capi/libfabric.map");
    let csrc = root.join("capi/c/varargs.c");
    let embed = root.join("capi/embed.rs");
    for f in [&map, &csrc, &embed, &root.join("cbindgen.toml")] {
        println!("cargo:rerun-if-changed={}", f.display());
    }

    println!("cargo:rustc-env=RSVERBS_COMMIT={}", commit(&root));

    let obj = out.join("rsverbs_varargs.o");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-c", "-fPIC", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&obj)
        .arg(&csrc)
        .status()
        .unwrap_or_else(|e| panic!("run {cc} (install gcc and libfabric-dev): {e}"));
    assert!(st.success(), "compiling {} failed", csrc.display());
    println!("cargo:rustc-cdylib-link-arg={}", obj.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", map.display());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");

    let cfg = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let header = root.join("include/rsverbs.h");
    match cbindgen::Builder::new().with_config(cfg).with_src(&embed).generate() {
        Ok(b) => {
            b.write_to_file(&header);
        }
        Err(e) => panic!("cbindgen: {e}"),
    }
}

/// The commit this build comes from (see the head of this file).
fn commit(root: &std::path::Path) -> String {
    println!("cargo:rerun-if-env-changed=RSVERBS_COMMIT");
    if let Ok(c) = std::env::var("RSVERBS_COMMIT") {
        if !c.trim().is_empty() {
            return c.trim().to_string();
        }
    }
    let git = |args: &[&str]| -> Option<String> {
        let o = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    // Only the repository rsverbs itself is the root of: a source tarball
    // unpacked inside some other git tree must not take that tree's commit.
    let top = git(&["rev-parse", "--show-toplevel"]).map(PathBuf::from);
    let same = |a: &std::path::Path, b: &std::path::Path| a.canonicalize().ok() == b.canonicalize().ok();
    if !top.is_some_and(|t| same(&t, root)) {
        return "unknown".into();
    }
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    // Rerun when HEAD moves (a commit, a checkout) or the sources change.
    for p in ["HEAD", "packed-refs"] {
        if let Some(f) = git(&["rev-parse", "--path-format=absolute", "--git-path", p]) {
            if std::path::Path::new(&f).exists() {
                println!("cargo:rerun-if-changed={f}");
            }
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(f) = git(&["rev-parse", "--path-format=absolute", "--git-path", &r]) {
            if std::path::Path::new(&f).exists() {
                println!("cargo:rerun-if-changed={f}");
            }
        }
    }
    const SOURCES: [&str; 6] = ["src", "capi", "fi", "build.rs", "Cargo.toml", "Cargo.lock"];
    for s in SOURCES {
        println!("cargo:rerun-if-changed={}", root.join(s).display());
    }
    let mut args = vec!["diff", "--quiet", "HEAD", "--"];
    args.extend(SOURCES);
    // git diff --quiet: 1 = differences, 0 = none (anything else: cannot tell).
    match Command::new("git").arg("-C").arg(root).args(&args).status().map(|s| s.code()) {
        Ok(Some(1)) => format!("{head}-dirty"),
        _ => head,
    }
}

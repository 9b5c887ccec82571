//! Build script:
//! * the cdylib gets libfabric's symbol versions (capi/libfabric.map) and
//!   `-Bsymbolic`, so it can stand in for libfabric.so.1 and, loaded as a
//!   provider by the real core, never binds its own calls to the core's copies;
//! * capi/c/varargs.c (the two variadic core functions stable Rust cannot
//!   define) is compiled with the system C compiler and linked into the cdylib
//!   only;
//! * include/rsverbs.h is generated from capi/embed.rs by cbindgen.
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

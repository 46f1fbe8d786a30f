// Links libvkpaged from an install prefix: $VKPAGED_PREFIX, else ../../build/install (where
// scripts/examples.sh installs it), with an rpath so the example runs without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let prefix = env::var("VKPAGED_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("../../build/install"));
    let libdir = prefix.join("lib");
    println!("cargo:rerun-if-env-changed=VKPAGED_PREFIX");
    println!("cargo:rustc-link-search=native={}", libdir.display());
    println!("cargo:rustc-link-lib=dylib=vkpaged");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", libdir.display());
}

//! `cfg(native_linux)`: the Linux-only fast paths (openat2, O_TMPFILE, inotify) are compiled in.
//! Off on every other OS, and on Linux with the `portable` feature.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(native_linux)");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let portable = std::env::var_os("CARGO_FEATURE_PORTABLE").is_some();
    if linux && !portable {
        println!("cargo::rustc-cfg=native_linux");
    }
}

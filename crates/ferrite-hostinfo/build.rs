//! Builds the Dhrystone benchmark (`src/bench/dhrystone.c`) with the system C compiler and
//! the optimisation the official client's build gives it, whatever Cargo profile builds
//! the crate: `p_iops` must not depend on how Ferrite itself was built.

fn main() {
    println!("cargo:rerun-if-changed=src/bench/dhrystone.c");
    cc::Build::new()
        .file("src/bench/dhrystone.c")
        .opt_level(2)
        .flag("-funroll-loops")
        .debug(false)
        .force_frame_pointer(false)
        .warnings(true)
        .extra_warnings(true)
        .compile("ferrite_dhrystone");
}

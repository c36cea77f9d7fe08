//! The crate-dependency rules docs/ARCHITECTURE.md states ("Dependencies point one way"),
//! checked against the workspace's manifests: each crate's normal, build and target
//! dependencies on other workspace crates (dev-dependencies, used by tests only, are free).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each workspace crate may use, as the architecture document lists it.
const ALLOWED: &[(&str, &[&str])] = &[
    (
        "ferrite-daemon",
        &[
            "ferrite-proto",
            "ferrite-sched",
            "ferrite-hostinfo",
            "ferrite-gui-rpc",
            "ferrite-supervise",
            "ferrite-project",
            "ferrite-net",
        ],
    ),
    ("ferrite-hostinfo", &["ferrite-proto"]),
    ("ferrite-project", &["ferrite-proto"]),
    ("ferrite-net", &["ferrite-project", "ferrite-proto"]),
    ("ferrite-testproject", &["ferrite-proto"]),
    ("ferrite-sim", &["ferrite-sched", "ferrite-proto"]),
    ("ferrite-ctl", &["ferrite-gui-rpc", "ferrite-proto"]),
    ("ferrite-sched", &[]),
    ("ferrite-gui-rpc", &[]),
    ("ferrite-supervise", &[]),
    ("ferrite-proto", &[]),
];

/// The end-to-end test crate, which may use any crate but the daemon's library.
const E2E: &str = "ferrite-e2e";

struct Manifest {
    name: String,
    /// Workspace crates used outside tests.
    uses: BTreeSet<String>,
    /// Workspace crates used by tests only.
    dev_uses: BTreeSet<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the daemon's crate lies two levels under the workspace root")
        .to_path_buf()
}

/// Reads the package name and the `ferrite-*` dependencies of a manifest, by section.
fn read_manifest(path: &Path) -> Manifest {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut name = String::new();
    let mut uses = BTreeSet::new();
    let mut dev_uses = BTreeSet::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_owned();
            // `[dependencies.ferrite-x]` and its target and dev forms name the crate.
            for kind in ["dependencies.", "build-dependencies.", "dev-dependencies."] {
                if let Some((before, dep)) = section.split_once(kind) {
                    if dep.starts_with("ferrite-") && (before.is_empty() || before.ends_with('.')) {
                        let set = if kind == "dev-dependencies." {
                            &mut dev_uses
                        } else {
                            &mut uses
                        };
                        set.insert(dep.to_owned());
                    }
                }
            }
            continue;
        }
        if section == "package" {
            if let Some(v) = line.strip_prefix("name") {
                if let Some(v) = v.trim_start().strip_prefix('=') {
                    name = v.trim().trim_matches('"').to_owned();
                }
            }
            continue;
        }
        let Some(dep) = line
            .split(|c: char| c == '=' || c == '.' || c.is_whitespace())
            .next()
            .filter(|d| d.starts_with("ferrite-"))
        else {
            continue;
        };
        if section == "dev-dependencies" || section.ends_with(".dev-dependencies") {
            dev_uses.insert(dep.to_owned());
        } else if section == "dependencies"
            || section == "build-dependencies"
            || section.ends_with(".dependencies")
            || section.ends_with(".build-dependencies")
        {
            uses.insert(dep.to_owned());
        }
    }
    assert!(!name.is_empty(), "{} names no package", path.display());
    Manifest {
        name,
        uses,
        dev_uses,
    }
}

fn workspace_manifests() -> Vec<Manifest> {
    let root = workspace_root();
    let mut paths = vec![root.join("tests/Cargo.toml")];
    let crates = std::fs::read_dir(root.join("crates")).expect("the crates folder");
    for entry in crates.flatten() {
        let manifest = entry.path().join("Cargo.toml");
        if manifest.is_file() {
            paths.push(manifest);
        }
    }
    paths.iter().map(|p| read_manifest(p)).collect()
}

#[test]
fn the_manifest_reader_sorts_dependencies_by_section() {
    let dir = std::env::temp_dir().join(format!("ferrite-arch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("Cargo.toml");
    std::fs::write(
        &path,
        "[package]\nname = \"ferrite-x\"\n\n[dependencies]\nferrite-proto.workspace = true\n\
         serde = \"1\"\n\n[target.'cfg(unix)'.dependencies]\nferrite-sched = { path = \"../s\" }\n\n\
         [dev-dependencies]\nferrite-testproject.workspace = true\n\n[dependencies.ferrite-net]\n\
         path = \"../n\"\n",
    )
    .expect("write");
    let m = read_manifest(&path);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(m.name, "ferrite-x");
    let uses: Vec<_> = m.uses.iter().map(String::as_str).collect();
    assert_eq!(uses, ["ferrite-net", "ferrite-proto", "ferrite-sched"]);
    let dev: Vec<_> = m.dev_uses.iter().map(String::as_str).collect();
    assert_eq!(dev, ["ferrite-testproject"]);
}

#[test]
fn workspace_crates_depend_only_as_the_architecture_document_says() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(name, deps)| (*name, deps.iter().copied().collect()))
        .collect();
    let manifests = workspace_manifests();
    let names: BTreeSet<&str> = manifests.iter().map(|m| m.name.as_str()).collect();
    for crate_name in allowed.keys() {
        assert!(
            names.contains(crate_name),
            "{crate_name} is in the rules but not in the workspace"
        );
    }
    let mut broken = Vec::new();
    for m in &manifests {
        if m.name != E2E && !allowed.contains_key(m.name.as_str()) {
            broken.push(format!(
                "{} is not in docs/ARCHITECTURE.md's dependency rules",
                m.name
            ));
            continue;
        }
        for dep in &m.uses {
            let ok = match allowed.get(m.name.as_str()) {
                Some(deps) => deps.contains(dep.as_str()),
                None => dep != "ferrite-daemon",
            };
            if !ok {
                broken.push(format!("{} uses {dep}", m.name));
            }
        }
        // No library depends on the daemon, not even for its tests.
        if m.name != "ferrite-daemon" && m.dev_uses.contains("ferrite-daemon") {
            broken.push(format!("{} uses ferrite-daemon in its tests", m.name));
        }
    }
    assert!(broken.is_empty(), "dependency rules broken: {broken:#?}");
}

#[test]
fn the_control_cli_never_links_the_scheduling_core() {
    let manifests = workspace_manifests();
    let uses: BTreeMap<&str, &BTreeSet<String>> = manifests
        .iter()
        .map(|m| (m.name.as_str(), &m.uses))
        .collect();
    // Everything `ferrite` links, through any chain of normal dependencies.
    let mut linked = BTreeSet::new();
    let mut todo = vec!["ferrite-ctl".to_owned()];
    while let Some(c) = todo.pop() {
        if let Some(deps) = uses.get(c.as_str()) {
            for d in deps.iter() {
                if linked.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
    }
    assert!(
        !linked.contains("ferrite-sched"),
        "ferrite links ferrite-sched through {linked:?}"
    );
}

/// The daemon's parts that take what they read as arguments and return what the glue must
/// do; the `Daemon` methods that borrow several parts at once live in `src/daemon/`. They
/// use no item of `lib.rs` either (only its sibling modules).
const PARTS_WITHOUT_DAEMON: &[&str] = &[
    "acct_mgr.rs",
    "host.rs",
    "notices.rs",
    "persist.rs",
    "projects",
    "projects.rs",
    "rpc",
    "setup.rs",
    "startup.rs",
    "thermal.rs",
    "trickle.rs",
    "turn.rs",
    "web",
];

/// The Rust files of `path` (a file, or a folder and its subfolders).
fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// The lines of `text` whose code (comments left out) names `word` as a whole identifier.
fn lines_naming(text: &str, word: &str) -> Vec<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find(word) {
            let before = rest[..i].chars().next_back();
            let after = rest[i + word.len()..].chars().next();
            if !before.is_some_and(ident) && !after.is_some_and(ident) {
                out.push(n + 1);
                break;
            }
            rest = &rest[i + word.len()..];
        }
    }
    out
}

#[test]
fn the_word_finder_skips_comments_and_longer_names() {
    let text = "use crate::Daemon;\n// a Daemon\nstruct DaemonLike;\nimpl Daemon {}\n";
    assert_eq!(lines_naming(text, "Daemon"), [1, 4]);
}

#[test]
fn the_daemons_parts_never_name_the_daemon() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for part in PARTS_WITHOUT_DAEMON {
        let files = rust_files(&src.join(part));
        assert!(!files.is_empty(), "src/{part} has no Rust file");
        for f in files {
            let text = std::fs::read_to_string(&f)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
            for line in lines_naming(&text, "Daemon") {
                broken.push(format!("{}:{line}", f.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "these parts name `Daemon` (their glue belongs in src/daemon/): {broken:#?}"
    );
}

/// The modules `lib.rs` declares (`mod x;`, with any visibility).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .map(|l| l.split("//").next().unwrap_or("").trim())
        .filter_map(|l| {
            let rest = l
                .strip_prefix("pub ")
                .or(l.strip_prefix("pub(crate) "))
                .unwrap_or(l);
            rest.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect()
}

/// The first segment of each `crate::` path in `text` (comments left out), with its line; a
/// `crate::{a, b::c}` group gives each of its items' first segment.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let code: Vec<&str> = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let joined = code.join("\n");
    let line_of = |i: usize| joined[..i].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = joined[from..].find("crate::") {
        let start = from + found;
        from = start + "crate::".len();
        if joined[..start].chars().next_back().is_some_and(ident) {
            continue;
        }
        let rest = &joined[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let mut depth = 0;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && ident(c) => {
                        let name: String = group[k..].chars().take_while(|&c| ident(c)).collect();
                        out.push((line_of(from + 1 + k), name));
                        item_start = false;
                    }
                    c if c.is_whitespace() => {}
                    _ => item_start = false,
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| ident(c)).collect();
            out.push((line_of(start), name));
        }
    }
    out
}

#[test]
fn the_path_finder_reads_single_and_grouped_paths() {
    let text = "use crate::config::x;\n// crate::Nope\nuse crate::{\n    event::Event,\n    Woke,\n    a::{b, c},\n};\nlet d = mycrate::E;\n";
    let paths = crate_paths(text);
    let got: Vec<(usize, &str)> = paths.iter().map(|(n, s)| (*n, s.as_str())).collect();
    assert_eq!(got, [(1, "config"), (4, "event"), (5, "Woke"), (6, "a")]);
    let lib = "pub mod a;\nmod b;\npub(crate) mod c;\nmod d {\nuse x;\n";
    let mods: Vec<_> = declared_modules(lib).into_iter().collect();
    assert_eq!(mods, ["a", "b", "c"]);
}

#[test]
fn the_daemons_parts_use_no_item_of_lib_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let modules = declared_modules(&lib);
    assert!(modules.contains("turn"), "no module found in lib.rs");
    let mut broken = Vec::new();
    for part in PARTS_WITHOUT_DAEMON {
        for f in rust_files(&src.join(part)) {
            let text = std::fs::read_to_string(&f)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
            for (line, name) in crate_paths(&text) {
                if !modules.contains(&name) {
                    broken.push(format!("{}:{line}: crate::{name}", f.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "these parts use items of lib.rs rather than its modules: {broken:#?}"
    );
}

//! The cli's modules form a layered graph: no module reaches back up to one that (directly or
//! not) uses it. Read from the sources: every `crate::<module>` path outside comments and string
//! literals, `use crate::{a, b::c}` groups included, is an arrow from the file's module (a
//! submodule counts as its top-level module) to `<module>`. `main.rs`, the wiring, is the root
//! and may use everything; nothing points at it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source with comments and string and character literals blanked out.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !chars[..i]
                .last()
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // An escaped character literal: '\n', '\'', '\u{..}'.
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_at(code: &str) -> &str {
    let end = code
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(code.len());
    &code[..end]
}

/// The modules a source names through `crate::`.
fn used_modules(source: &str) -> BTreeSet<String> {
    let code = code_only(source);
    let mut used = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at]
            .chars()
            .last()
            .is_some_and(|p| p.is_alphanumeric() || p == '_' || p == '$')
        {
            continue;
        }
        let rest = code[at + "crate::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the first name of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        used.insert(ident_at(&group[k..]).to_owned());
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(rest);
            if !name.is_empty() {
                used.insert(name.to_owned());
            }
        }
    }
    used
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// The files `#[path = "…"] mod name;` declarations place, relative to `src`, each with the
/// top-level module of the file that declares it (e.g. `campaign_cmd/pipeline.rs`, a
/// submodule of `campaign`).
fn path_attributes(src: &Path, files: &[PathBuf]) -> BTreeMap<PathBuf, String> {
    let mut placed = BTreeMap::new();
    for file in files {
        let source = std::fs::read_to_string(file).expect("read a source");
        for (at, _) in source.match_indices("#[path = \"") {
            let rest = &source[at + "#[path = \"".len()..];
            let target = rest.split('"').next().expect("a path");
            let dir = file.parent().expect("a directory");
            let target = dir
                .join(target)
                .strip_prefix(src)
                .expect("under src")
                .to_owned();
            placed.insert(target, top_module(src, file));
        }
    }
    placed
}

/// The top-level module a file under `src` belongs to by its place.
fn top_module(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src");
    let first = relative.components().next().expect("a component");
    Path::new(first.as_os_str())
        .file_stem()
        .expect("a name")
        .to_string_lossy()
        .into_owned()
}

/// Module → the modules it uses, read from `src/**/*.rs`.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let placed = path_attributes(&src, &files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src");
        let module = placed
            .get(relative)
            .cloned()
            .unwrap_or_else(|| top_module(&src, &file));
        if module == "main" {
            continue;
        }
        let source = std::fs::read_to_string(&file).expect("read a source");
        let uses = graph.entry(module.clone()).or_default();
        uses.extend(used_modules(&source).into_iter().filter(|m| *m != module));
    }
    graph
}

/// A cycle of the graph as its path (first module repeated at the end), if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|p| p == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn references_are_read_from_code_and_use_groups() {
    let source = r##"
        use crate::exit::{Failure, print_json};
        use crate::{input::read, route::{self, Route}, shipped};
        // crate::commented
        /// [`crate::documented`]
        let s = "crate::quoted"; let r = r#"crate::raw"#; let c = '"';
        let t = crate::telemetry::decide(); let n = notcrate::other;
    "##;
    let used: Vec<String> = used_modules(source).into_iter().collect();
    assert_eq!(
        used,
        ["exit", "input", "route", "shipped", "telemetry"].map(String::from)
    );
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["c".to_owned()]));
    graph.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        find_cycle(&graph),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
}

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = module_graph();
    assert!(graph.contains_key("exit") && graph.contains_key("np_run"));
    if let Some(cycle) = find_cycle(&graph) {
        for (module, uses) in &graph {
            eprintln!("{module} -> {uses:?}");
        }
        panic!(
            "the cli's modules import each other in a circle: {} (move the shared item down to \
             the module that owns it; see docs/architecture.md)",
            cycle.join(" -> ")
        );
    }
    // The bottom: the output mode uses no module, the failure type only the output mode, and
    // the activation gate none (its tests compile it alone).
    assert_eq!(graph["render"], BTreeSet::new(), "render uses no module");
    assert!(
        graph["exit"].iter().all(|m| m == "render"),
        "exit uses only render: {:?}",
        graph["exit"]
    );
    assert_eq!(
        graph["activation"],
        BTreeSet::new(),
        "activation uses no module"
    );
}

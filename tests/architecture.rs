//! ARCHITECTURE.md's structural rules, checked against the source tree under `src/`.
//!
//! The test reads every `.rs` file under `src/`, takes comments, string literals and test code
//! (`#[cfg(test)]` items, files under a `tests/` directory or named `tests.rs`) out of the code it
//! checks, and fails with one line per broken rule: file, line, rule and what broke it. The rules
//! are the tables just below; change a rule by changing its table. `KNOWN` lists the breaches
//! that are tolerated for now, each with the reason; an entry that no longer matches anything is
//! itself reported, so the list only shrinks.
//!
//! The checker works on `(path, text)` pairs, so the unit tests at the bottom feed it small
//! synthetic trees, one deliberate breach of each rule, and one clean tree.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

// ---------------------------------------------------------------------------------------------
// The rules. Paths are relative to the crate root; an entry ending in `/` names a directory
// (and the file of the same name, `src/disk/` also covers `src/disk.rs`).
// ---------------------------------------------------------------------------------------------

/// Rule 2: top-level modules that must not import the listed ones (`*` = anything in the crate).
const FORBIDDEN_EDGES: &[Forbidden] = &[
    Forbidden {
        from: "api",
        to: &["log", "producer"],
        why:
            "handlers ask storage for partition operations; they never hold a log or producer state",
    },
    Forbidden {
        from: "protocol",
        to: &["log"],
        why: "the wire codec is pure: it sees bytes, not logs",
    },
    Forbidden {
        from: "config",
        to: &["storage"],
        why: "settings sit below everything that reads them",
    },
    Forbidden {
        from: "producer",
        to: &["storage"],
        why: "producer state belongs to one partition's log, below storage",
    },
    Forbidden {
        from: "record_batch",
        to: &["*"],
        why: "the RecordBatch format is pure and at the bottom",
    },
    Forbidden {
        from: "log",
        to: &["storage", "api", "group", "network"],
        why: "one partition's log knows nothing of the broker around it",
    },
];

/// Rule 2: the layers of ARCHITECTURE.md's diagram, bottom first. A top-level module imports
/// only from layers below its own, so the diagram is what the imports show; a module that
/// imports or is imported and is not listed here is reported, so a new module takes its place.
const LAYERS: &[&[&str]] = &[
    &["alloc_guard", "metrics", "time"],
    &["config", "disk", "record_batch"],
    &[
        "group", "log", "producer", "protocol", "quota", "security", "txn",
    ],
    &["storage"],
    &["api", "fuzzing"],
    &["network"],
    &["server"],
    &["embedded"],
];

/// Rule 2: top-level modules that may import only the listed ones.
const ONLY_EDGES: &[OnlyEdges] = &[OnlyEdges {
    from: "disk",
    may_import: &["time", "metrics"],
    why:
        "the storage-I/O interface is at the bottom (it times log flushes into a metrics histogram)",
}];

// Rule 1 has no table: no cycle is allowed, between top-level modules (`src/<m>.rs` or
// `src/<m>/`) nor between the files of one top-level module (such as `group/persist` and
// `group/rebalance`). Between files, a child using its parent or ancestor, and a parent using
// its children, are not counted: that is how Rust modules are built.

/// Rule 3: what touches files (opens, names, lists, renames, removes or maps them).
const FILES: Capability = Capability {
    rule: Rule::Files,
    patterns: &[
        "std::fs",
        "tokio::fs",
        "File::",
        "fs::OpenOptions",
        "memmap2",
        // Through `use std::fs;`; the same names called on a `Disk` are the interface itself.
        "fs::read_dir",
        "fs::rename",
        "fs::remove_file",
    ],
    allowed: &[
        ("src/disk/", "the one narrow storage-I/O interface"),
        (
            "src/log/index.rs",
            "the offset and time indexes are memory-mapped (memmap2)",
        ),
        (
            "src/network/send.rs",
            "sendfile from a segment handle it is handed; it never opens, writes or names a file",
        ),
        (
            "src/config/mod.rs",
            "reads server.properties once at start-up, before any log directory is open",
        ),
    ],
};

/// Rule 4: what opens sockets.
const SOCKETS: Capability = Capability {
    rule: Rule::Sockets,
    patterns: &[
        "TcpListener",
        "TcpStream",
        "TcpSocket",
        "UdpSocket",
        "UnixListener",
        "UnixStream",
        "tokio::net",
        "socket2",
    ],
    allowed: &[(
        "src/network/",
        "the only module that reads and writes sockets",
    )],
};

/// Rule 5: where `unsafe` may appear.
const UNSAFE: Capability = Capability {
    rule: Rule::Unsafe,
    patterns: &["unsafe"],
    allowed: &[
        ("src/disk/", "libc calls for storage I/O (pwritev, statvfs)"),
        ("src/log/index.rs", "the memory-mapped indexes"),
        ("src/network/send.rs", "send and sendfile"),
        ("src/main.rs", "setrlimit at start-up"),
        ("src/alloc_guard.rs", "the global allocator"),
    ],
};

/// Rule 6: who chooses Kafka error codes. `producer`, `storage` and `log` return their own
/// error types; `api/errors.rs` maps them.
const ERROR_CODES: Capability = Capability {
    rule: Rule::ErrorCodes,
    patterns: &["ResponseError", "error_code", "error_codes"],
    allowed: &[
        ("src/api/", "handlers answer with Kafka's error codes"),
        (
            "src/group/",
            "the group coordinator answers with Kafka's codes, as Kafka's does",
        ),
        (
            "src/txn/",
            "the transaction coordinator answers with Kafka's codes, as Kafka's does",
        ),
        (
            "src/protocol/newer_versions/messages.rs",
            "writes the codes handlers chose into the layouts kafka-protocol lacks; chooses none",
        ),
        (
            "src/protocol/newer_versions/txn.rs",
            "writes the codes handlers chose into the layouts kafka-protocol lacks; chooses none",
        ),
    ],
};

/// Rule 7: the longest a file under `src/` may be, in lines.
const MAX_LINES: usize = 600;

/// Rule 7: files allowed to be longer, each with its reason.
const LONG_FILES: &[(&str, &str)] = &[];

/// Rule 8: what no comment may mention: code comments explain, or point into `docs/`.
/// (Spelled in pieces so that this file does not itself read as a citation to a plain grep.)
const CITATIONS: &[&str] = &[
    concat!("digest", " §"),
    concat!("Kafka", " digest"),
    concat!("..", "/shared"),
    concat!("kafka", "-internals"),
];

/// Breaches tolerated for now. `what` is a file (or directory ending in `/`) for rules 2-9,
/// and the members of the cycle, sorted and joined with ", ", for rule 1.
const KNOWN: &[Known] = &[];

// ---------------------------------------------------------------------------------------------
// The test over the real tree.
// ---------------------------------------------------------------------------------------------

#[test]
fn source_tree_keeps_the_architecture_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect_rs_files(root, &root.join("src"), &mut files);
    assert!(
        files.len() > 10,
        "found only {} files under src/",
        files.len()
    );
    let report = check_tree(&files, KNOWN);
    assert!(report.is_empty(), "\n{}", report.join("\n"));
}

fn collect_rs_files(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_rs_files(root, &path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let relative = path.strip_prefix(root).expect("under the root");
            let name = relative.to_string_lossy().replace('\\', "/");
            out.push((name, text));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The checker.
// ---------------------------------------------------------------------------------------------

struct Forbidden {
    from: &'static str,
    to: &'static [&'static str],
    why: &'static str,
}

struct OnlyEdges {
    from: &'static str,
    may_import: &'static [&'static str],
    why: &'static str,
}

struct Capability {
    rule: Rule,
    patterns: &'static [&'static str],
    allowed: &'static [(&'static str, &'static str)],
}

struct Known {
    rule: Rule,
    what: &'static str,
    #[allow(dead_code)] // read by people: why the breach is tolerated
    why: &'static str,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    Cycle,
    Edge,
    Files,
    Sockets,
    Unsafe,
    ErrorCodes,
    Size,
    Citation,
    ModuleDoc,
}

impl Rule {
    fn number(self) -> u8 {
        match self {
            Rule::Cycle => 1,
            Rule::Edge => 2,
            Rule::Files => 3,
            Rule::Sockets => 4,
            Rule::Unsafe => 5,
            Rule::ErrorCodes => 6,
            Rule::Size => 7,
            Rule::Citation => 8,
            Rule::ModuleDoc => 9,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Rule::Cycle => "no import cycles",
            Rule::Edge => "forbidden import",
            Rule::Files => "only the listed modules touch files",
            Rule::Sockets => "only the listed modules open sockets",
            Rule::Unsafe => "unsafe only in the listed files",
            Rule::ErrorCodes => "only the listed modules choose Kafka error codes",
            Rule::Size => "file size",
            Rule::Citation => "no citation of outside documents",
            Rule::ModuleDoc => "every file starts with a //! module doc",
        }
    }
}

#[derive(Debug)]
struct Violation {
    rule: Rule,
    file: String,
    line: usize,
    /// What a `Known` entry is matched against: the file, or the cycle's members.
    key: String,
    message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: rule {} ({}): {}",
            self.file,
            self.line,
            self.rule.number(),
            self.rule.name(),
            self.message
        )
    }
}

/// Checks every rule over `(path, text)` pairs (paths like `src/log/mod.rs`) and returns one
/// line per violation not covered by `known`, then one per `known` entry that matched nothing.
fn check_tree(files: &[(String, String)], known: &[Known]) -> Vec<String> {
    let mut violations = all_violations(files);
    violations.sort_by(|a, b| {
        (a.rule.number(), &a.file, a.line).cmp(&(b.rule.number(), &b.file, b.line))
    });
    let mut used = vec![false; known.len()];
    let mut report = Vec::new();
    for v in &violations {
        let matched = known
            .iter()
            .position(|k| k.rule == v.rule && covers(k.rule, k.what, &v.key));
        match matched {
            Some(i) => used[i] = true,
            None => report.push(v.to_string()),
        }
    }
    for (k, used) in known.iter().zip(used) {
        if !used {
            report.push(format!(
                "KNOWN entry for rule {} `{}` no longer matches anything: remove it from the table",
                k.rule.number(),
                k.what
            ));
        }
    }
    report
}

fn covers(rule: Rule, what: &str, key: &str) -> bool {
    if rule == Rule::Cycle {
        what == key
    } else {
        in_scope(key, what)
    }
}

/// Whether `file` is named by a table entry: a file, or a directory ending in `/` (which also
/// covers the module file of the same name).
fn in_scope(file: &str, entry: &str) -> bool {
    match entry.strip_suffix('/') {
        Some(dir) => file.starts_with(entry) || file == format!("{dir}.rs"),
        None => file == entry,
    }
}

fn all_violations(files: &[(String, String)]) -> Vec<Violation> {
    let parsed: Vec<SourceFile> = files.iter().map(|(p, t)| SourceFile::parse(p, t)).collect();
    let test_modules: BTreeSet<Vec<String>> = parsed
        .iter()
        .flat_map(|f| {
            f.test_submodules.iter().map(move |name| {
                let mut m = f.module.clone().unwrap_or_default();
                m.push(name.clone());
                m
            })
        })
        .collect();
    let is_test_file = |f: &SourceFile| {
        f.path.split('/').any(|c| c == "tests")
            || f.path.ends_with("/tests.rs")
            || f.module
                .as_ref()
                .is_some_and(|m| test_modules.iter().any(|t| m.starts_with(t)))
    };

    let mut out = Vec::new();
    for f in &parsed {
        check_text_rules(f, &mut out);
        if !is_test_file(f) {
            for cap in [&FILES, &SOCKETS, &UNSAFE, &ERROR_CODES] {
                check_capability(f, cap, &mut out);
            }
        }
    }
    let code: Vec<&SourceFile> = parsed.iter().filter(|f| !is_test_file(f)).collect();
    check_imports(&code, &parsed, &mut out);
    out
}

/// Rules 7, 8 and 9, which look at every file, test code included.
fn check_text_rules(f: &SourceFile, out: &mut Vec<Violation>) {
    let lines = f.text.lines().count();
    if lines > MAX_LINES && !LONG_FILES.iter().any(|(p, _)| in_scope(&f.path, p)) {
        out.push(f.violation(
            Rule::Size,
            lines,
            format!(
                "{lines} lines, over {MAX_LINES}: split it, or list it in LONG_FILES with a reason"
            ),
        ));
    }
    for (line, comment) in &f.comments {
        for citation in CITATIONS {
            if comment.contains(citation) {
                out.push(f.violation(
                    Rule::Citation,
                    *line,
                    format!(
                        "comment cites `{citation}`: explain the point here or point into docs/"
                    ),
                ));
            }
        }
    }
    let first = f.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if !first.trim_start().starts_with("//!") {
        out.push(f.violation(
            Rule::ModuleDoc,
            1,
            "the file does not start with a `//!` paragraph saying what the module is for".into(),
        ));
    }
}

/// Rules 3-6: a pattern found in non-test code of a file the capability does not list.
fn check_capability(f: &SourceFile, cap: &Capability, out: &mut Vec<Violation>) {
    if cap.allowed.iter().any(|(p, _)| in_scope(&f.path, p)) {
        return;
    }
    for (index, line) in f.code.lines().enumerate() {
        let found: Vec<&str> = cap
            .patterns
            .iter()
            .copied()
            .filter(|p| contains_word(line, p))
            .collect();
        if !found.is_empty() {
            let allowed: Vec<&str> = cap.allowed.iter().map(|(p, _)| *p).collect();
            out.push(f.violation(
                cap.rule,
                index + 1,
                format!(
                    "uses `{}`; allowed only in {}",
                    found.join("`, `"),
                    allowed.join(", ")
                ),
            ));
        }
    }
}

/// Whether `pattern` occurs in `line` as whole identifiers: not glued to a longer name on
/// either side.
fn contains_word(line: &str, pattern: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(pattern).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + pattern.len()..].chars().next();
        let starts_ident = pattern.starts_with(ident);
        let ends_ident = pattern.ends_with(ident);
        let glued_before = starts_ident && before.is_some_and(ident);
        let glued_after = ends_ident && after.is_some_and(ident);
        !glued_before && !glued_after
    })
}

/// One use of another module: where it is written.
#[derive(Clone)]
struct Edge {
    file: String,
    line: usize,
}

/// Rules 1 and 2 over the import graph.
fn check_imports(code: &[&SourceFile], all: &[SourceFile], out: &mut Vec<Violation>) {
    let modules: BTreeSet<Vec<String>> = all.iter().filter_map(|f| f.module.clone()).collect();
    let top_level: BTreeSet<String> = modules
        .iter()
        .filter(|m| m.len() == 1)
        .map(|m| m[0].clone())
        .collect();

    // First use of each edge, between top-level modules and between files of one module.
    let mut top: BTreeMap<(String, String), Edge> = BTreeMap::new();
    let mut top_per_file: BTreeMap<(String, String, String), Edge> = BTreeMap::new();
    let mut sub: BTreeMap<(String, String), Edge> = BTreeMap::new();
    for f in code {
        let Some(from) = &f.module else { continue };
        if from.is_empty() {
            continue; // lib.rs only declares the modules
        }
        for (line, path) in &f.paths {
            let Some(target) = path.first() else { continue };
            if !top_level.contains(target) {
                continue;
            }
            let edge = Edge {
                file: f.path.clone(),
                line: *line,
            };
            if target != &from[0] {
                let key = (from[0].clone(), target.clone());
                top_per_file
                    .entry((key.0.clone(), key.1.clone(), f.path.clone()))
                    .or_insert_with(|| edge.clone());
                top.entry(key).or_insert(edge);
                continue;
            }
            let to = longest_module_prefix(path, &modules);
            let related = to.starts_with(from) || from.starts_with(&to);
            if !related {
                sub.entry((from.join("/"), to.join("/"))).or_insert(edge);
            }
        }
    }

    for ((from, to, _), edge) in &top_per_file {
        for rule in FORBIDDEN_EDGES.iter().filter(|r| r.from == from) {
            if rule.to.contains(&"*") || rule.to.contains(&to.as_str()) {
                out.push(edge_violation(edge, from, to, rule.why));
            }
        }
        for rule in ONLY_EDGES.iter().filter(|r| r.from == from) {
            if !rule.may_import.contains(&to.as_str()) {
                out.push(edge_violation(edge, from, to, rule.why));
            }
        }
        match (layer_of(from), layer_of(to)) {
            (Some(from_layer), Some(to_layer)) if from_layer <= to_layer => {
                out.push(edge_violation(
                    edge,
                    from,
                    to,
                    &format!(
                        "layer {from_layer} may import only from layers below it, and `{to}` is in layer {to_layer}"
                    ),
                ));
            }
            (Some(_), Some(_)) => {}
            _ => out.push(edge_violation(
                edge,
                from,
                to,
                "every module that imports or is imported has a layer in LAYERS",
            )),
        }
    }

    report_cycles(&top, "top-level modules", out);
    report_cycles(&sub, "files of one module", out);
}

/// The layer of a top-level module in `LAYERS`, 0 at the bottom.
fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn edge_violation(edge: &Edge, from: &str, to: &str, why: &str) -> Violation {
    Violation {
        rule: Rule::Edge,
        file: edge.file.clone(),
        line: edge.line,
        key: edge.file.clone(),
        message: format!("`{from}` imports `{to}`: {why}"),
    }
}

fn longest_module_prefix(path: &[String], modules: &BTreeSet<Vec<String>>) -> Vec<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains(prefix))
        .unwrap_or_else(|| path[..1].to_vec())
}

/// One violation per strongly connected set of modules: its members, and the shortest cycle
/// through the first of them with where each import is written.
fn report_cycles(edges: &BTreeMap<(String, String), Edge>, what: &str, out: &mut Vec<Violation>) {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from).or_default().push(to);
        graph.entry(to).or_default();
    }
    for component in strongly_connected(&graph) {
        if component.len() < 2 {
            continue;
        }
        let start = component[0];
        let cycle = shortest_cycle(&graph, start, &component);
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let edge = &edges[&(w[0].to_string(), w[1].to_string())];
                format!("{} -> {} ({}:{})", w[0], w[1], edge.file, edge.line)
            })
            .collect();
        let first = &edges[&(cycle[0].to_string(), cycle[1].to_string())];
        out.push(Violation {
            rule: Rule::Cycle,
            file: first.file.clone(),
            line: first.line,
            key: component.join(", "),
            message: format!(
                "cycle between {what} {{{}}}: {}",
                component.join(", "),
                steps.join(", ")
            ),
        });
    }
}

/// Tarjan's algorithm; each component's members sorted.
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(node: &'a str, graph: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &next in &graph[node] {
            if !s.index.contains_key(next) {
                visit(next, graph, s);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top);
                if top == node {
                    break;
                }
            }
            component.sort();
            s.components.push(component);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for &node in graph.keys() {
        if !s.index.contains_key(node) {
            visit(node, graph, &mut s);
        }
    }
    s.components.sort();
    s.components
}

/// Breadth-first from `start` back to itself inside `component`: `[start, .., start]`.
fn shortest_cycle<'a>(
    graph: &BTreeMap<&'a str, Vec<&'a str>>,
    start: &'a str,
    component: &[&'a str],
) -> Vec<&'a str> {
    let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in &graph[node] {
            if !component.contains(&next) {
                continue;
            }
            if next == start {
                let mut path = vec![start, node];
                let mut at = node;
                while at != start {
                    at = previous[at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if !previous.contains_key(next) {
                previous.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    unreachable!("a strongly connected component of two or more has a cycle through each member")
}

// ---------------------------------------------------------------------------------------------
// Reading a file: comments, code without literals and test items, and the crate paths it uses.
// ---------------------------------------------------------------------------------------------

struct SourceFile {
    path: String,
    text: String,
    /// The module path (`src/group/persist.rs` → `["group", "persist"]`, `src/lib.rs` → `[]`);
    /// None for the binary's `main.rs` and for files outside `src/`.
    module: Option<Vec<String>>,
    /// The text with comments, literals and `#[cfg(test)]` items blanked; lines kept.
    code: String,
    /// Every comment (doc comments too) with the line it starts on.
    comments: Vec<(usize, String)>,
    /// `#[cfg(test)] mod name;` declarations: files holding only test code.
    test_submodules: Vec<String>,
    /// Every crate path the code uses (`crate::`, `super::`, `self::`), resolved to a path
    /// from the crate root, with its line.
    paths: Vec<(usize, Vec<String>)>,
}

impl SourceFile {
    fn parse(path: &str, text: &str) -> SourceFile {
        let module = module_path(path);
        let (stripped, comments) = strip_comments_and_literals(text);
        let (code, test_submodules) = blank_test_items(&stripped);
        let paths = match &module {
            Some(m) => crate_paths(&code, m),
            None => Vec::new(),
        };
        SourceFile {
            path: path.to_string(),
            text: text.to_string(),
            module,
            code,
            comments,
            test_submodules,
            paths,
        }
    }

    fn violation(&self, rule: Rule, line: usize, message: String) -> Violation {
        Violation {
            rule,
            file: self.path.clone(),
            line,
            key: self.path.clone(),
            message,
        }
    }
}

fn module_path(path: &str) -> Option<Vec<String>> {
    let inner = path.strip_prefix("src/")?.strip_suffix(".rs")?;
    if inner == "main" {
        return None;
    }
    if inner == "lib" {
        return Some(Vec::new());
    }
    let mut parts: Vec<String> = inner.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// Replaces comments and the contents of string and char literals with spaces (newlines kept,
/// so line numbers stay), and returns the comments with their first line.
fn strip_comments_and_literals(text: &str) -> (String, Vec<(usize, String)>) {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let mut comments = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            comments.push((line, chars[start..i].iter().collect()));
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
            comments.push((line, chars[start..i].iter().collect()));
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
        } else if c == 'r'
            && !(start > 0 && is_ident(chars[start - 1]) && chars[start - 1] != 'b')
            && matches!(next, Some('"') | Some('#'))
            && raw_string_end(&chars, i + 1).is_some()
        {
            i = raw_string_end(&chars, i + 1).unwrap_or(chars.len());
        } else if c == '\'' && next == Some('\\') {
            i += 3;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i = (i + 1).min(chars.len());
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            code.push(c);
            if c == '\n' {
                line += 1;
            }
            i += 1;
            continue;
        }
        for &skipped in &chars[start..i] {
            code.push(blank(skipped));
            if skipped == '\n' {
                line += 1;
            }
        }
    }
    (code, comments)
}

/// For `r` followed by `#`* and `"` at `at`, the index just past the closing `"#`*.
fn raw_string_end(chars: &[char], at: usize) -> Option<usize> {
    let hashes = chars[at..].iter().take_while(|&&c| c == '#').count();
    if chars.get(at + hashes) != Some(&'"') {
        return None; // a raw identifier like r#type
    }
    let mut i = at + hashes + 1;
    while i < chars.len() {
        if chars[i] == '"'
            && chars[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}

/// Blanks every item under `#[cfg(test)]` (to its `;` or the end of its `{ }` block) and
/// returns the names of `#[cfg(test)] mod name;` declarations.
fn blank_test_items(code: &str) -> (String, Vec<String>) {
    let mut chars: Vec<char> = code.chars().collect();
    let mut test_modules = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '#' {
            i += 1;
            continue;
        }
        let Some(attr_end) = attribute_end(&chars, i) else {
            i += 1;
            continue;
        };
        let attr: String = chars[i..attr_end]
            .iter()
            .filter(|c| !c.is_whitespace())
            .collect();
        if attr != "#[cfg(test)]" {
            i = attr_end;
            continue;
        }
        let mut j = attr_end;
        loop {
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            match attribute_end(&chars, j) {
                Some(end) => j = end,
                None => break,
            }
        }
        let item_start = j;
        let mut depth = 0i32;
        while j < chars.len() {
            match chars[j] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => {
                    j += 1;
                    break;
                }
                '{' if depth == 0 => {
                    j = matching_brace(&chars, j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let item: String = chars[item_start..j.min(chars.len())].iter().collect();
        let words: Vec<&str> = item
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        let declared = match words.as_slice() {
            [.., "mod", name] if item.trim_end().ends_with(';') => Some(name.to_string()),
            _ => None,
        };
        test_modules.extend(declared);
        let end = j.min(chars.len());
        for c in &mut chars[i..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = j;
    }
    (chars.into_iter().collect(), test_modules)
}

/// For `#[` or `#![` at `at`, the index just past its matching `]`.
fn attribute_end(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at;
    if chars.get(i) != Some(&'#') {
        return None;
    }
    i += 1;
    if chars.get(i) == Some(&'!') {
        i += 1;
    }
    if chars.get(i) != Some(&'[') {
        return None;
    }
    let mut depth = 0;
    while i < chars.len() {
        match chars[i] {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// For `{` at `at`, the index just past its matching `}`.
fn matching_brace(chars: &[char], at: usize) -> usize {
    let mut depth = 0;
    for (i, &c) in chars.iter().enumerate().skip(at) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    chars.len()
}

#[derive(PartialEq, Debug)]
enum Token {
    Ident(String),
    Punct(String),
}

fn tokens(code: &str) -> Vec<(usize, Token)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((line, Token::Ident(chars[start..i].iter().collect())));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((line, Token::Punct("::".into())));
            i += 2;
        } else {
            out.push((line, Token::Punct(c.to_string())));
            i += 1;
        }
    }
    out
}

/// Every path starting with `crate::`, `super::` or `self::` in `code`, use trees expanded
/// (`crate::{a, b::c}` gives `a` and `b::c`), resolved from the crate root for a file whose
/// module path is `module`.
fn crate_paths(code: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let toks = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let starts_path = matches!(&toks[i].1, Token::Ident(w) if w == "crate" || w == "super" || w == "self")
            && toks
                .get(i + 1)
                .is_some_and(|t| t.1 == Token::Punct("::".into()))
            && (i == 0 || !matches!(&toks[i - 1].1, Token::Punct(p) if p == "::" || p == "$"));
        if starts_path {
            let mut paths = Vec::new();
            let end = use_tree(&toks, i, module.to_vec(), &mut paths);
            let line = toks[i].0;
            out.extend(paths.into_iter().map(|p| (line, p)));
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Parses one use tree (or plain path) at `i`, starting from `base`; returns the index after it.
fn use_tree(
    toks: &[(usize, Token)],
    mut i: usize,
    base: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = base;
    while i < toks.len() {
        match &toks[i].1 {
            Token::Ident(word) => {
                match word.as_str() {
                    "crate" => path.clear(),
                    "super" => {
                        path.pop();
                    }
                    "self" => {}
                    _ => path.push(word.clone()),
                }
                i += 1;
                if toks
                    .get(i)
                    .is_some_and(|t| t.1 == Token::Punct("::".into()))
                {
                    i += 1;
                    continue;
                }
                out.push(path);
                return i;
            }
            Token::Punct(p) if p == "{" => {
                i += 1;
                while i < toks.len() && toks[i].1 != Token::Punct("}".into()) {
                    i = use_tree(toks, i, path.clone(), out);
                    // Skip `as name` and anything else up to the next `,` or `}`.
                    let mut depth = 0;
                    while i < toks.len() {
                        match &toks[i].1 {
                            Token::Punct(p) if p == "{" => depth += 1,
                            Token::Punct(p) if p == "}" && depth == 0 => break,
                            Token::Punct(p) if p == "}" => depth -= 1,
                            Token::Punct(p) if p == "," && depth == 0 => {
                                i += 1;
                                break;
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                }
                return i + 1;
            }
            _ => {
                out.push(path);
                return i + usize::from(toks[i].1 == Token::Punct("*".into()));
            }
        }
    }
    out.push(path);
    i
}

// ---------------------------------------------------------------------------------------------
// The checker's own tests: one breach of each rule in a small tree, and a clean tree.
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod checker {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    /// A clean tree every breach below is added to.
    fn clean() -> Vec<(String, String)> {
        tree(&[
            ("src/lib.rs", "//! The crate.\npub mod api;\npub mod storage;\npub mod log;\npub mod time;\npub mod disk;\n"),
            ("src/time.rs", "//! Clocks.\npub struct Clock;\n"),
            ("src/disk/mod.rs", "//! Storage I/O.\nuse crate::time::Clock;\npub fn open() { let _ = std::fs::File::open(\"x\"); }\n"),
            ("src/log/mod.rs", "//! A log.\nmod segment;\nuse crate::disk;\n#[cfg(test)]\nmod tests;\n"),
            ("src/log/segment.rs", "//! A segment.\nuse super::*;\npub struct Segment;\n"),
            ("src/log/tests/mod.rs", "//! Log tests.\nuse crate::storage::X;\nfn t() { std::fs::remove_file(\"a\").unwrap(); }\n"),
            ("src/storage/mod.rs", "//! Storage.\nuse crate::{log::Log, time};\n/// Says \"crate::api\" in a comment.\nconst S: &str = \"std::fs crate::api\";\n"),
            ("src/api/mod.rs", "//! Handlers.\nuse kafka_protocol::ResponseError;\nuse crate::storage;\n#[cfg(test)]\nmod tests {\n    use crate::log::Log;\n    fn f() { std::fs::read_dir(\".\"); }\n}\n"),
        ])
    }

    fn with(extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut files = clean();
        for (path, text) in extra {
            files.retain(|(p, _)| p != path);
            files.push((path.to_string(), text.to_string()));
        }
        files
    }

    fn report(files: &[(String, String)]) -> Vec<String> {
        check_tree(files, &[])
    }

    fn assert_reports(files: &[(String, String)], expected: &[&str]) {
        let report = report(files);
        for e in expected {
            assert!(
                report.iter().any(|line| line.contains(e)),
                "expected a line containing {e:?} in:\n{}",
                report.join("\n")
            );
        }
    }

    #[test]
    fn a_clean_tree_passes() {
        assert_eq!(report(&clean()), Vec::<String>::new());
    }

    #[test]
    fn rule_1_a_cycle_between_top_level_modules_is_reported_with_its_path() {
        let files = with(&[(
            "src/time.rs",
            "//! Clocks.\npub fn now() { crate::api::handle(); }\n",
        )]);
        assert_reports(
            &files,
            &[
                "src/api/mod.rs:3: rule 1",
                "cycle between top-level modules {api, disk, log, storage, time}: api -> storage (src/api/mod.rs:3)",
            ],
        );
    }

    #[test]
    fn rule_1_a_cycle_between_sibling_files_is_reported() {
        let files = with(&[
            ("src/log/a.rs", "//! A.\nuse super::b::B;\npub struct A;\n"),
            (
                "src/log/b.rs",
                "//! B.\npub struct B;\nfn f() { let _ = crate::log::a::A; }\n",
            ),
        ]);
        assert_reports(
            &files,
            &["rule 1", "{log/a, log/b}: log/a -> log/b (src/log/a.rs:2)"],
        );
    }

    #[test]
    fn rule_1_the_pair_named_by_the_issue_is_reported() {
        let files = with(&[
            (
                "src/group/mod.rs",
                "//! Groups.\nmod persist;\nmod rebalance;\n",
            ),
            (
                "src/group/persist.rs",
                "//! Persist.\nuse crate::group::{rebalance::{self, Phase}, Other};\n",
            ),
            (
                "src/group/rebalance.rs",
                "//! Rebalance.\nuse super::persist::store;\n",
            ),
        ]);
        assert_reports(
            &files,
            &["src/group/persist.rs:2: rule 1 (no import cycles): cycle between files of one module \
               {group/persist, group/rebalance}: group/persist -> group/rebalance \
               (src/group/persist.rs:2), group/rebalance -> group/persist (src/group/rebalance.rs:2)"],
        );
    }

    #[test]
    fn rule_1_a_child_using_its_parent_is_no_cycle() {
        let files = with(&[(
            "src/log/segment.rs",
            "//! A segment.\nuse crate::log::Log;\n",
        )]);
        assert_eq!(report(&files), Vec::<String>::new());
    }

    #[test]
    fn rule_2_an_import_from_the_same_or_a_higher_layer_is_reported() {
        let files = with(&[
            (
                "src/storage/mod.rs",
                "//! Storage.\nuse crate::{log::Log, time, api};\n",
            ),
            (
                "src/time.rs",
                "//! Clocks.\nfn f() { crate::nowhere::g(); }\n",
            ),
        ]);
        assert_reports(
            &files,
            &[
                "src/storage/mod.rs:2: rule 2 (forbidden import): `storage` imports `api`: layer 3 may import only from layers below it, and `api` is in layer 4",
            ],
        );
        let report = report(&files);
        assert!(!report.iter().any(|l| l.contains("`storage` imports `log`")));
        assert!(!report
            .iter()
            .any(|l| l.contains("`storage` imports `time`")));
    }

    #[test]
    fn rule_2_forbidden_edges_are_reported() {
        let files = with(&[
            (
                "src/api/fetch.rs",
                "//! Fetch.\nfn f() { crate::log::read(); }\n",
            ),
            (
                "src/log/mod.rs",
                "//! A log.\nmod segment;\nuse crate::{disk, storage::Topic};\n",
            ),
            (
                "src/disk/mod.rs",
                "//! Storage I/O.\nuse crate::{time, log};\n",
            ),
        ]);
        assert_reports(
            &files,
            &[
                "src/api/fetch.rs:2: rule 2 (forbidden import): `api` imports `log`",
                "src/log/mod.rs:3: rule 2 (forbidden import): `log` imports `storage`",
                "src/disk/mod.rs:2: rule 2 (forbidden import): `disk` imports `log`",
            ],
        );
        assert!(!report(&files)
            .iter()
            .any(|l| l.contains("`disk` imports `time`")));
    }

    #[test]
    fn rule_2_anything_from_record_batch_is_reported() {
        let files = with(&[(
            "src/record_batch.rs",
            "//! Batches.\nuse crate::time::Clock;\n",
        )]);
        assert_reports(
            &files,
            &[
                "src/record_batch.rs:2: rule 2",
                "`record_batch` imports `time`",
            ],
        );
    }

    #[test]
    fn rule_3_file_access_outside_disk_is_reported_and_test_code_is_exempt() {
        let files = with(&[(
            "src/storage/mod.rs",
            "//! Storage.\n\nfn f() {\n    let f = std::fs::OpenOptions::new();\n}\n#[cfg(test)]\nfn g() { std::fs::rename(\"a\", \"b\"); }\n",
        )]);
        let report = report(&files);
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(
            report[0].starts_with("src/storage/mod.rs:4: rule 3"),
            "{report:?}"
        );
        assert!(
            report[0].contains("`std::fs`, `fs::OpenOptions`"),
            "{report:?}"
        );
    }

    #[test]
    fn a_file_declared_by_a_cfg_test_mod_is_test_code() {
        let files = with(&[
            (
                "src/storage/mod.rs",
                "//! Storage.\n#[cfg(test)]\npub(crate) mod fixtures;\n",
            ),
            (
                "src/storage/fixtures.rs",
                "//! Test fixtures.\nfn f() { std::fs::remove_file(\"a\").unwrap(); }\n",
            ),
        ]);
        assert_eq!(report(&files), Vec::<String>::new());
        let files = with(&[(
            "src/storage/fixtures.rs",
            "//! Not declared under cfg(test).\nfn f() { std::fs::remove_file(\"a\").unwrap(); }\n",
        )]);
        assert_reports(&files, &["src/storage/fixtures.rs:2: rule 3"]);
    }

    #[test]
    fn rule_4_a_socket_outside_network_is_reported() {
        let files = with(&[(
            "src/api/mod.rs",
            "//! Handlers.\nuse tokio::net::TcpStream;\n",
        )]);
        assert_reports(
            &files,
            &["src/api/mod.rs:2: rule 4", "`TcpStream`, `tokio::net`"],
        );
    }

    #[test]
    fn rule_5_unsafe_outside_the_listed_files_is_reported() {
        let files = with(&[(
            "src/log/segment.rs",
            "//! A segment.\n// unsafe in a comment is fine\nfn f() { unsafe { libc::sync() } }\n",
        )]);
        let report = report(&files);
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(
            report[0].starts_with("src/log/segment.rs:3: rule 5"),
            "{report:?}"
        );
    }

    #[test]
    fn rule_6_kafka_error_codes_outside_api_and_group_are_reported() {
        let files = with(&[(
            "src/storage/mod.rs",
            "//! Storage.\nfn f() -> i16 { kafka_protocol::ResponseError::NotLeader.code() }\n",
        )]);
        assert_reports(&files, &["src/storage/mod.rs:2: rule 6"]);
    }

    #[test]
    fn rule_7_a_long_file_is_reported() {
        let long = format!("//! Long.\n{}", "fn f() {}\n".repeat(MAX_LINES));
        let files = with(&[("src/time.rs", long.as_str())]);
        assert_reports(&files, &[&format!("src/time.rs:{}: rule 7", MAX_LINES + 1)]);
    }

    #[test]
    fn rule_8_a_comment_citing_an_outside_document_is_reported() {
        let files = with(&[(
            "src/time.rs",
            concat!(
                "//! Clocks.\n\n/// As the digest",
                " §3 says.\npub struct Clock; /* see ..",
                "/shared/notes */\n"
            ),
        )]);
        assert_reports(
            &files,
            &[
                concat!(
                    "src/time.rs:3: rule 8 (no citation of outside documents): comment cites `digest",
                    " §`"
                ),
                "src/time.rs:4: rule 8",
            ],
        );
    }

    #[test]
    fn rule_9_a_file_without_a_module_doc_is_reported() {
        let files = with(&[(
            "src/time.rs",
            "\n/// Not a module doc.\npub struct Clock;\n",
        )]);
        assert_reports(&files, &["src/time.rs:1: rule 9"]);
    }

    #[test]
    fn known_breaches_are_tolerated_and_stale_ones_reported() {
        let files = with(&[("src/api/mod.rs", "//! Handlers.\nuse crate::log::Log;\n")]);
        let known = [
            Known {
                rule: Rule::Edge,
                what: "src/api/",
                why: "fixed by item 1 of the issue",
            },
            Known {
                rule: Rule::Unsafe,
                what: "src/log/segment.rs",
                why: "fixed by item 6 of the issue",
            },
        ];
        let report = check_tree(&files, &known);
        assert_eq!(report.len(), 1, "{report:?}");
        assert!(
            report[0].contains("rule 5 `src/log/segment.rs` no longer matches"),
            "{report:?}"
        );
    }

    #[test]
    fn literals_and_lifetimes_do_not_confuse_the_reader() {
        let text = "//! X.\nfn f<'a>(s: &'a str) -> char { let _ = r#\"crate::api \"# ; let _ = b'\"'; '\\'' }\nuse crate::api;\n";
        let file = SourceFile::parse("src/log/x.rs", text);
        assert_eq!(file.paths, vec![(3, vec!["api".to_string()])]);
    }
}

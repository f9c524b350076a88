//! Reads the layouts of the C ABI header by compiling it.
//!
//! Parses `include/uapi/linux/tenstorrent.h` for its struct names, their
//! field names and its value macros (nothing is listed by hand here), writes
//! a small C program that prints `sizeof`/`offsetof` of every field and the
//! value of every macro, compiles it with the system C compiler, runs it and
//! writes the values into `$OUT_DIR/c_abi.rs`. The `abi` module's tests
//! compare the Rust mirror against them.
//!
//! When 32-bit compilation works on the host (`cc -m32`), the same program is
//! also built 32-bit so the tests can check the layout is the same there.
//!
//! A missing C compiler does not break the build of the library: the
//! generated file then carries the error and only the layout tests fail.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

struct CStruct {
    name: String,
    fields: Vec<String>,
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let include = manifest.join("../../include/uapi");
    let header = include.join("linux/tenstorrent.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());

    let generated = match generate(&header, &include, &out) {
        Ok(code) => code,
        Err(e) => {
            println!("cargo:warning=ABI layout check disabled: {e}");
            format!(
                "pub const ERROR: Option<&str> = Some({e:?});\n\
                 pub const STRUCTS: &[CStruct] = &[];\n\
                 pub const STRUCTS_M32: Option<&[CStruct]> = None;\n\
                 pub const DEFINES: &[(&str, u64)] = &[];\n"
            )
        }
    };
    fs::write(out.join("c_abi.rs"), generated).unwrap();
}

fn generate(header: &Path, include: &Path, out: &Path) -> Result<String, String> {
    let text = fs::read_to_string(header).map_err(|e| format!("{}: {e}", header.display()))?;
    let text = strip_comments(&text).replace("\\\n", " ");
    let defines = parse_defines(&text);
    let structs = parse_structs(&text);
    if structs.is_empty() || defines.is_empty() {
        return Err("no struct or no #define found in the header".into());
    }

    let program = c_program(&structs, &defines);
    let source = out.join("c_abi.c");
    fs::write(&source, program).map_err(|e| e.to_string())?;
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());

    let native = compile_and_run(&cc, &source, include, &out.join("c_abi"), &[])?;
    let m32 = compile_and_run(&cc, &source, include, &out.join("c_abi32"), &["-m32"]).ok();

    let mut code = String::from("pub const ERROR: Option<&str> = None;\n");
    code += &format!(
        "pub const STRUCTS: &[CStruct] = &[\n{}];\n",
        structs_rust(&native)
    );
    match m32 {
        Some(m32) => {
            code += &format!(
                "pub const STRUCTS_M32: Option<&[CStruct]> = Some(&[\n{}]);\n",
                structs_rust(&m32)
            )
        }
        None => code += "pub const STRUCTS_M32: Option<&[CStruct]> = None;\n",
    }
    code += "pub const DEFINES: &[(&str, u64)] = &[\n";
    for line in native.lines().filter(|l| l.starts_with("D ")) {
        let mut it = line.split_whitespace().skip(1);
        let (name, value) = (it.next().unwrap(), it.next().unwrap());
        writeln!(code, "    ({name:?}, {value}),").unwrap();
    }
    code += "];\n";
    Ok(code)
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out += &rest[..b];
                match rest[b + 2..].find("*/") {
                    Some(end) => rest = &rest[b + 2 + end + 2..],
                    None => return out,
                }
                out.push(' ');
            }
            (_, Some(l)) => {
                out += &rest[..l];
                match rest[l..].find('\n') {
                    Some(end) => rest = &rest[l + end..],
                    None => return out,
                }
            }
            _ => {
                out += rest;
                return out;
            }
        }
    }
}

/// Object-like `TENSTORRENT_*` macros (function-like ones are skipped).
fn parse_defines(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.trim_start().strip_prefix('#')?.split_whitespace();
            (it.next()? == "define").then_some(())?;
            let name = it.next()?;
            (name.starts_with("TENSTORRENT_") && !name.contains('(') && it.next().is_some())
                .then(|| name.to_string())
        })
        .collect()
}

fn parse_structs(text: &str) -> Vec<CStruct> {
    let mut structs = Vec::new();
    let mut rest = text;
    while let Some(pos) = rest.find("struct ") {
        rest = &rest[pos + 7..];
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let Some(end) = after.find('}') else { break };
        let fields = after[1..end]
            .split(';')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| {
                let last = m.split_whitespace().last().unwrap();
                last.split('[').next().unwrap().to_string()
            })
            .collect();
        structs.push(CStruct { name, fields });
        rest = &after[end..];
    }
    structs
}

fn c_program(structs: &[CStruct], defines: &[String]) -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <linux/tenstorrent.h>\n\
         int main(void)\n{\n",
    );
    for s in structs {
        let n = &s.name;
        writeln!(c, "\tprintf(\"S {n} %zu\\n\", sizeof(struct {n}));").unwrap();
        for f in &s.fields {
            writeln!(
                c,
                "\tprintf(\"F {n} {f} %zu %zu\\n\", offsetof(struct {n}, {f}), \
                 sizeof(((struct {n} *)0)->{f}));"
            )
            .unwrap();
        }
    }
    for d in defines {
        writeln!(c, "\tprintf(\"D {d} %llu\\n\", (unsigned long long)({d}));").unwrap();
    }
    c += "\treturn 0;\n}\n";
    c
}

fn compile_and_run(
    cc: &str,
    source: &Path,
    include: &Path,
    exe: &Path,
    extra: &[&str],
) -> Result<String, String> {
    let status = Command::new(cc)
        .args(extra)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(include)
        .arg("-o")
        .arg(exe)
        .arg(source)
        .output()
        .map_err(|e| format!("running {cc}: {e}"))?;
    if !status.status.success() {
        return Err(format!(
            "{cc} {extra:?} failed: {}",
            String::from_utf8_lossy(&status.stderr)
        ));
    }
    let run = Command::new(exe)
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    if !run.status.success() {
        return Err(format!("{} failed", exe.display()));
    }
    String::from_utf8(run.stdout).map_err(|e| e.to_string())
}

fn structs_rust(output: &str) -> String {
    let mut code = String::new();
    let mut open = false;
    for line in output.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        match t[0] {
            "S" => {
                if open {
                    code += "    ] },\n";
                }
                writeln!(
                    code,
                    "    CStruct {{ name: {:?}, size: {}, fields: &[",
                    t[1], t[2]
                )
                .unwrap();
                open = true;
            }
            "F" => writeln!(code, "        ({:?}, {}, {}),", t[2], t[3], t[4]).unwrap(),
            _ => {}
        }
    }
    if open {
        code += "    ] },\n";
    }
    code
}

//! The host primitives the JavaScript prelude builds Node's API on: output, files, the
//! process, time, and the queue of promise jobs and unhandled rejections.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::path::Path;
use std::rc::Rc;

use boa_engine::builtins::promise::{OperationType, PromiseState};
use boa_engine::context::HostHooks;
use boa_engine::object::builtins::{JsArray, JsFunction, JsPromise, JsUint8Array};
use boa_engine::object::{JsObject, ObjectInitializer};
use boa_engine::property::Attribute;
use boa_engine::{
    Context, JsArgs, JsError, JsNativeError, JsResult, JsString, JsValue, NativeFunction, Source,
    builtins::promise::Promise, js_string,
};

const PRELUDE: &str = include_str!("prelude.js");

thread_local! {
    /// Promises rejected with no handler yet, in order (a handler added later removes one).
    static UNHANDLED: RefCell<Vec<JsObject<Promise>>> = const { RefCell::new(Vec::new()) };
}

/// Tracks rejections without a handler, which Node reports and exits 1 for.
pub struct Hooks;

impl HostHooks for Hooks {
    fn promise_rejection_tracker(
        &self,
        promise: &JsObject<Promise>,
        operation: OperationType,
        _context: &mut Context,
    ) {
        UNHANDLED.with(|u| {
            let mut u = u.borrow_mut();
            match operation {
                OperationType::Reject => u.push(promise.clone()),
                OperationType::Handle => u.retain(|p| !JsObject::equals(p, promise)),
            }
        });
    }
}

pub fn context() -> Context {
    Context::builder()
        .host_hooks(Rc::new(Hooks))
        .build()
        .expect("a context with the default realm")
}

pub fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_string();
    }
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    let joined = format!("{}/{}", cwd.trim_end_matches('/'), path);
    normalize(&joined)
}

fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Writes the prelude's entry point into the context and returns `main(kind, code, file)`.
pub fn install(
    ctx: &mut Context,
    filename: &str,
    stdin_dash: bool,
    args: &[String],
) -> JsResult<JsObject> {
    let host = build_host(ctx, filename, stdin_dash, args)?;
    let factory = ctx.eval(Source::from_bytes(PRELUDE).with_path(Path::new("node:internal")))?;
    let factory = factory
        .as_callable()
        .ok_or_else(|| JsNativeError::typ().with_message("prelude is not a function"))?
        .clone();
    let main = factory.call(&JsValue::undefined(), &[host.into()], ctx)?;
    main.as_callable().ok_or_else(|| {
        JsNativeError::typ()
            .with_message("prelude gave no main")
            .into()
    })
}

pub fn finish(code: i32) -> ! {
    crate::flush_stdout();
    std::process::exit(code);
}

fn s(v: &JsValue, ctx: &mut Context) -> JsResult<String> {
    Ok(v.to_string(ctx)?.to_std_string_escaped())
}

fn js(text: &str) -> JsValue {
    JsValue::from(JsString::from(text))
}

/// An `Error` whose message starts with Node's code (`ENOENT: no such file or directory, open
/// 'x'`); the prelude reads the code, syscall and path back out of it.
fn io_err(e: &std::io::Error, syscall: &str, path: &str, dest: Option<&str>) -> JsError {
    use std::io::ErrorKind as K;
    let (code, text) = match e.kind() {
        K::NotFound => ("ENOENT", "no such file or directory"),
        K::AlreadyExists => ("EEXIST", "file already exists"),
        K::PermissionDenied => ("EACCES", "permission denied"),
        K::IsADirectory => ("EISDIR", "illegal operation on a directory"),
        K::NotADirectory => ("ENOTDIR", "not a directory"),
        K::DirectoryNotEmpty => ("ENOTEMPTY", "directory not empty"),
        K::InvalidInput => ("EINVAL", "invalid argument"),
        K::StorageFull | K::QuotaExceeded => ("ENOSPC", "no space left on device"),
        K::FileTooLarge => ("EFBIG", "file too large"),
        K::ReadOnlyFilesystem => ("EROFS", "read-only file system"),
        _ => ("EIO", "i/o error"),
    };
    let msg = match dest {
        Some(d) => format!("{code}: {text}, {syscall} '{path}' -> '{d}'"),
        None => format!("{code}: {text}, {syscall} '{path}'"),
    };
    JsNativeError::error().with_message(msg).into()
}

type Native = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

fn build_host(
    ctx: &mut Context,
    filename: &str,
    stdin_dash: bool,
    args: &[String],
) -> JsResult<JsObject> {
    let mut argv = vec![js("/usr/bin/node")];
    if !filename.starts_with('[') {
        argv.push(js(filename));
    } else if stdin_dash {
        argv.push(js("-"));
    }
    argv.extend(args.iter().map(|a| js(a)));
    let argv = JsArray::from_iter(argv, ctx);
    let env = ObjectInitializer::new(ctx).build();
    for (k, v) in std::env::vars_os() {
        env.set(
            JsString::from(k.to_string_lossy().as_ref()),
            js(&v.to_string_lossy()),
            false,
            ctx,
        )?;
    }
    let fns: &[(&str, Native, usize)] = &[
        ("write", write, 2),
        ("readFile", read_file, 2),
        ("writeFile", write_file, 4),
        ("exists", exists, 1),
        ("stat", stat, 2),
        ("readdir", readdir, 1),
        ("mkdir", mkdir, 2),
        ("rm", rm, 3),
        ("rename", rename, 2),
        ("copyFile", copy_file, 2),
        ("realpath", realpath, 1),
        ("readlink", readlink, 1),
        ("cwd", cwd, 0),
        ("chdir", chdir, 1),
        ("exit", exit, 1),
        ("hrtime", hrtime, 0),
        ("sleep", sleep, 1),
        ("runJobs", run_jobs, 0),
        ("takeUnhandled", take_unhandled, 0),
        ("promiseState", promise_state, 1),
        ("utf8Encode", utf8_encode, 1),
        ("utf8Decode", utf8_decode, 1),
        ("compile", compile, 2),
        ("evalScript", eval_script, 2),
    ];
    let mut init = ObjectInitializer::new(ctx);
    for (name, f, len) in fns {
        init.function(NativeFunction::from_fn_ptr(*f), JsString::from(*name), *len);
    }
    init.property(js_string!("argv"), argv, Attribute::all());
    init.property(js_string!("env"), env, Attribute::all());
    init.property(js_string!("version"), js(crate::VERSION), Attribute::all());
    Ok(init.build())
}

fn write(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let fd = a.get_or_undefined(0).to_i32(ctx)?;
    let data = bytes_of(a.get_or_undefined(1), ctx)?;
    let r = if fd == 2 {
        crate::flush_stdout();
        std::io::stderr().write_all(&data)
    } else {
        std::io::stdout().write_all(&data)
    };
    if let Err(e) = r {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            finish(0);
        }
        return Err(io_err(&e, "write", "", None));
    }
    Ok(JsValue::undefined())
}

/// A string as UTF-8, or the bytes of a Uint8Array (Buffer).
fn bytes_of(v: &JsValue, ctx: &mut Context) -> JsResult<Vec<u8>> {
    if let Some(obj) = v.as_object()
        && let Ok(arr) = JsUint8Array::from_object(obj.clone())
    {
        return arr.to_vec(ctx);
    }
    Ok(s(v, ctx)?.into_bytes())
}

fn uint8(bytes: Vec<u8>, ctx: &mut Context) -> JsResult<JsValue> {
    Ok(JsUint8Array::from_iter(bytes, ctx)?.into())
}

/// `readFile(path | fd 0, asBytes)`: a string (UTF-8, invalid bytes replaced) or a Uint8Array.
fn read_file(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let target = a.get_or_undefined(0);
    let as_bytes = a.get_or_undefined(1).to_boolean();
    let data = if target.is_number() {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| io_err(&e, "read", "<stdin>", None))?;
        buf
    } else {
        let path = s(target, ctx)?;
        if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            return Err(JsNativeError::error()
                .with_message("EISDIR: illegal operation on a directory, read")
                .into());
        }
        std::fs::read(&path).map_err(|e| io_err(&e, "open", &path, None))?
    };
    if as_bytes {
        uint8(data, ctx)
    } else {
        Ok(js(&String::from_utf8_lossy(&data)))
    }
}

fn write_file(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let data = bytes_of(a.get_or_undefined(1), ctx)?;
    let append = a.get_or_undefined(2).to_boolean();
    let exclusive = a.get_or_undefined(3).to_boolean();
    let mut opts = std::fs::OpenOptions::new();
    if append {
        opts.append(true).create(true);
    } else if exclusive {
        opts.write(true).create_new(true);
    } else {
        opts.write(true).create(true).truncate(true);
    }
    let mut f = opts
        .open(&path)
        .map_err(|e| io_err(&e, "open", &path, None))?;
    f.write_all(&data)
        .map_err(|e| io_err(&e, "write", &path, None))?;
    Ok(JsValue::undefined())
}

fn exists(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    Ok(std::fs::metadata(path).is_ok().into())
}

fn stat(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let follow = a.get_or_undefined(1).to_boolean();
    let m = if follow {
        std::fs::metadata(&path)
    } else {
        std::fs::symlink_metadata(&path)
    }
    .map_err(|e| io_err(&e, if follow { "stat" } else { "lstat" }, &path, None))?;
    let ms = |t: std::io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let ft = m.file_type();
    let mode = guest_rt::path_mode(Path::new(&path), follow).unwrap_or(0o644);
    let kind = if ft.is_dir() {
        0o040000
    } else if ft.is_symlink() {
        0o120000
    } else {
        0o100000
    };
    let obj = ObjectInitializer::new(ctx)
        .property(js_string!("size"), m.len() as f64, Attribute::all())
        .property(js_string!("isFile"), ft.is_file(), Attribute::all())
        .property(js_string!("isDir"), ft.is_dir(), Attribute::all())
        .property(js_string!("isSymlink"), ft.is_symlink(), Attribute::all())
        .property(js_string!("mtimeMs"), ms(m.modified()), Attribute::all())
        .property(js_string!("atimeMs"), ms(m.accessed()), Attribute::all())
        .property(js_string!("birthtimeMs"), ms(m.created()), Attribute::all())
        .property(js_string!("mode"), kind | mode, Attribute::all())
        .build();
    Ok(obj.into())
}

fn readdir(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let mut names: Vec<(String, u8)> = std::fs::read_dir(&path)
        .map_err(|e| io_err(&e, "scandir", &path, None))?
        .flatten()
        .map(|e| {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => 2,
                Ok(t) if t.is_symlink() => 3,
                _ => 1,
            };
            (e.file_name().to_string_lossy().into_owned(), kind)
        })
        .collect();
    names.sort();
    let items: Vec<JsValue> = names
        .into_iter()
        .map(|(n, k)| JsArray::from_iter([js(&n), JsValue::from(k)], ctx).into())
        .collect();
    Ok(JsArray::from_iter(items, ctx).into())
}

fn mkdir(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let recursive = a.get_or_undefined(1).to_boolean();
    if recursive {
        let existed = Path::new(&path).exists();
        std::fs::create_dir_all(&path).map_err(|e| io_err(&e, "mkdir", &path, None))?;
        return Ok(if existed {
            JsValue::undefined()
        } else {
            js(&absolute(&path))
        });
    }
    std::fs::create_dir(&path).map_err(|e| io_err(&e, "mkdir", &path, None))?;
    Ok(JsValue::undefined())
}

/// `rm(path, kind, force)`: kind 0 unlink, 1 rmdir, 2 rm (files, and trees with recursive).
fn rm(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let kind = a.get_or_undefined(1).to_i32(ctx)?;
    let recursive = a.get_or_undefined(2).to_boolean();
    let r = match kind {
        0 => std::fs::remove_file(&path).map_err(|e| io_err(&e, "unlink", &path, None)),
        1 if recursive => {
            std::fs::remove_dir_all(&path).map_err(|e| io_err(&e, "rmdir", &path, None))
        }
        1 => std::fs::remove_dir(&path).map_err(|e| io_err(&e, "rmdir", &path, None)),
        _ => {
            let m =
                std::fs::symlink_metadata(&path).map_err(|e| io_err(&e, "lstat", &path, None))?;
            if m.is_dir() {
                if !recursive {
                    return Err(JsNativeError::error()
                        .with_message(format!(
                            "ERR_FS_EISDIR: Path is a directory: rm returned EISDIR (is a directory) {path}"
                        ))
                        .into());
                }
                std::fs::remove_dir_all(&path).map_err(|e| io_err(&e, "rm", &path, None))
            } else {
                std::fs::remove_file(&path).map_err(|e| io_err(&e, "rm", &path, None))
            }
        }
    };
    r.map(|()| JsValue::undefined())
}

fn rename(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let from = s(a.get_or_undefined(0), ctx)?;
    let to = s(a.get_or_undefined(1), ctx)?;
    std::fs::rename(&from, &to).map_err(|e| io_err(&e, "rename", &from, Some(&to)))?;
    Ok(JsValue::undefined())
}

fn copy_file(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let from = s(a.get_or_undefined(0), ctx)?;
    let to = s(a.get_or_undefined(1), ctx)?;
    std::fs::copy(&from, &to).map_err(|e| io_err(&e, "copyfile", &from, Some(&to)))?;
    Ok(JsValue::undefined())
}

fn realpath(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let p = std::fs::canonicalize(&path).map_err(|e| io_err(&e, "realpath", &path, None))?;
    Ok(js(&p.to_string_lossy()))
}

fn readlink(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    let p = std::fs::read_link(&path).map_err(|e| io_err(&e, "readlink", &path, None))?;
    Ok(js(&p.to_string_lossy()))
}

fn cwd(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(js(&absolute(".")))
}

fn chdir(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let path = s(a.get_or_undefined(0), ctx)?;
    std::env::set_current_dir(&path).map_err(|e| io_err(&e, "chdir", &path, None))?;
    Ok(JsValue::undefined())
}

fn exit(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let code = a.get_or_undefined(0).to_i32(ctx)?;
    finish(code)
}

thread_local! {
    static START: std::time::Instant = std::time::Instant::now();
}

/// Milliseconds since the program started (performance.now()).
fn hrtime(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    Ok(START.with(|s| s.elapsed().as_secs_f64() * 1000.0).into())
}

fn sleep(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let ms = a.get_or_undefined(0).to_number(ctx)?;
    if ms > 0.0 {
        std::thread::sleep(std::time::Duration::from_secs_f64(ms / 1000.0));
    }
    Ok(JsValue::undefined())
}

fn run_jobs(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    ctx.run_jobs()?;
    Ok(JsValue::undefined())
}

/// The reasons of promises still rejected without a handler, as `[promise, reason]` pairs.
fn take_unhandled(_: &JsValue, _: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let list = UNHANDLED.with(|u| std::mem::take(&mut *u.borrow_mut()));
    let mut out = Vec::new();
    for p in list {
        let obj = p.upcast();
        if let Ok(promise) = JsPromise::from_object(obj.clone())
            && let PromiseState::Rejected(reason) = promise.state()
        {
            out.push(JsArray::from_iter([obj.into(), reason], ctx).into());
        }
    }
    Ok(JsArray::from_iter(out, ctx).into())
}

/// `[state, value]` of a promise for util.inspect: 0 pending, 1 fulfilled, 2 rejected.
fn promise_state(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let Some(obj) = a.get_or_undefined(0).as_object() else {
        return Ok(JsValue::undefined());
    };
    let Ok(p) = JsPromise::from_object(obj.clone()) else {
        return Ok(JsValue::undefined());
    };
    let (k, v) = match p.state() {
        PromiseState::Pending => (0, JsValue::undefined()),
        PromiseState::Fulfilled(v) => (1, v),
        PromiseState::Rejected(v) => (2, v),
    };
    Ok(JsArray::from_iter([JsValue::from(k), v], ctx).into())
}

fn utf8_encode(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let text = s(a.get_or_undefined(0), ctx)?;
    uint8(text.into_bytes(), ctx)
}

fn utf8_decode(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let bytes = bytes_of(a.get_or_undefined(0), ctx)?;
    Ok(js(&String::from_utf8_lossy(&bytes)))
}

/// Compiles a CommonJS module body into a function of (exports, require, module, __filename,
/// __dirname), as Node's wrapper does.
fn compile(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let body = s(a.get_or_undefined(0), ctx)?;
    let file = s(a.get_or_undefined(1), ctx)?;
    let wrapped =
        format!("(function (exports, require, module, __filename, __dirname) {{{body}\n}})");
    let f = ctx.eval(Source::from_bytes(wrapped.as_bytes()).with_path(Path::new(&file)))?;
    let f: Option<JsFunction> = f
        .as_object()
        .and_then(|o| JsFunction::from_object(o.clone()));
    f.map(JsValue::from).ok_or_else(|| {
        JsNativeError::typ()
            .with_message("module did not compile")
            .into()
    })
}

/// Runs `-e`/`-p`/stdin code as a global script named like Node names it (`[eval]`).
fn eval_script(_: &JsValue, a: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let code = s(a.get_or_undefined(0), ctx)?;
    let name = s(a.get_or_undefined(1), ctx)?;
    ctx.eval(Source::from_bytes(code.as_bytes()).with_path(Path::new(&name)))
}

//! `sandboxd images build|list`: the Docker runtime's images, built here from Debian's
//! packages (see wasmsand-docker's `images`), and the VM runtime's disk image (`build vm`,
//! see wasmsand-vm's `images`), which needs no Docker engine.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use wasmsand_docker::images::{self, RECIPES};
use wasmsand_docker::{Engine, EngineSettings};

#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// The Docker engine's socket (default: $SANDBOX_DOCKER_HOST, else
    /// unix:///var/run/docker.sock)
    #[arg(long, value_name = "URL", global = true)]
    docker_host: Option<String>,
    #[command(subcommand)]
    command: ImagesCommand,
}

#[derive(Debug, Subcommand)]
enum ImagesCommand {
    /// Build images from Debian's packages (all Docker images when none is named): python,
    /// node, go, java, generic; and `vm`, the VM runtime's disk image (never built unless
    /// named; needs root, no Docker engine), whose path is the last line printed on stdout. An
    /// image whose recipe is unchanged is not built again; a root filesystem kept in the cache
    /// is only imported
    Build {
        /// Images to build
        names: Vec<String>,
        /// Where root filesystems, VM images and downloaded packages are kept (default:
        /// $XDG_CACHE_HOME/wasmsand/images)
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// Build even when an image of the same recipe exists
        #[arg(long)]
        rebuild: bool,
        /// `vm` only: a Debian package to add to the image (repeatable; besides bash,
        /// coreutils, python3, procps and busybox-static)
        #[arg(long = "package", value_name = "NAME")]
        packages: Vec<String>,
        /// `vm` only: free space in the guest's file system, in MiB (default 512)
        #[arg(long, value_name = "MB")]
        free_mb: Option<u64>,
    },
    /// List the images and whether the engine has them
    List,
}

pub fn run(args: ImagesArgs) -> u8 {
    let args = match args.command {
        ImagesCommand::Build {
            mut names,
            cache_dir,
            rebuild,
            packages,
            free_mb,
        } if names.iter().any(|n| n == "vm") => {
            names.retain(|n| n != "vm");
            let cache = cache_dir.clone().unwrap_or_else(images::default_cache_dir);
            let recipe = wasmsand_vm::images::Recipe {
                packages,
                free_mb: free_mb.unwrap_or(0),
            };
            let code = build_vm(&recipe, &cache, rebuild);
            if code != 0 || names.is_empty() {
                return code;
            }
            ImagesArgs {
                docker_host: args.docker_host,
                command: ImagesCommand::Build {
                    names,
                    cache_dir,
                    rebuild,
                    packages: Vec::new(),
                    free_mb: None,
                },
            }
        }
        ImagesCommand::Build {
            ref packages,
            free_mb,
            ..
        } if !packages.is_empty() || free_mb.is_some() => {
            eprintln!("sandboxd images: --package and --free-mb apply to the vm image only");
            return 2;
        }
        _ => args,
    };
    let host = args
        .docker_host
        .or_else(|| std::env::var("SANDBOX_DOCKER_HOST").ok())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".into());
    let engine = Engine::new(EngineSettings {
        host,
        instance: "images".into(),
        cgroup_root: "/sys/fs/cgroup".into(),
    });
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sandboxd images: {e}");
            return 1;
        }
    };
    rt.block_on(async move {
        if let Err(e) = engine.info().await {
            eprintln!("sandboxd images: {e}");
            return 1;
        }
        match args.command {
            ImagesCommand::List => list(&engine).await,
            ImagesCommand::Build {
                names,
                cache_dir,
                rebuild,
                ..
            } => build(&engine, names, cache_dir, rebuild).await,
        }
    })
}

/// The VM image: progress on stderr, its path as the last line of stdout.
fn build_vm(recipe: &wasmsand_vm::images::Recipe, cache: &std::path::Path, rebuild: bool) -> u8 {
    let started = std::time::Instant::now();
    let mut progress = |line: &str| eprintln!("{line}");
    match wasmsand_vm::images::build(recipe, cache, rebuild, &mut progress) {
        Ok(path) => {
            eprintln!("vm: done in {:.1} s", started.elapsed().as_secs_f64());
            println!("{}", path.display());
            0
        }
        Err(e) => {
            eprintln!("sandboxd images: vm: {e}");
            1
        }
    }
}

async fn list(engine: &Engine) -> u8 {
    for r in RECIPES {
        match engine.built(r).await {
            Ok(Some(i)) => println!(
                "{:<8} {} {}",
                r.name,
                i.versioned_tag().unwrap_or("untagged"),
                i.id
            ),
            Ok(None) => println!("{:<8} not built (sandboxd images build {})", r.name, r.name),
            Err(e) => {
                eprintln!("sandboxd images: {e}");
                return 1;
            }
        }
    }
    0
}

async fn build(
    engine: &Engine,
    names: Vec<String>,
    cache_dir: Option<PathBuf>,
    rebuild: bool,
) -> u8 {
    let mut recipes = Vec::new();
    for n in &names {
        match images::recipe(n) {
            Some(r) => recipes.push(r),
            None if n.starts_with("dotnet") => {
                eprintln!(
                    "sandboxd images: there is no .NET image: Debian has no .NET package, and \
                     images are built from Debian's packages only"
                );
                return 2;
            }
            None => {
                let known: Vec<&str> = RECIPES.iter().map(|r| r.name).collect();
                eprintln!(
                    "sandboxd images: unknown image {n:?}; the images: {}",
                    known.join(", ")
                );
                return 2;
            }
        }
    }
    if recipes.is_empty() {
        recipes = RECIPES.iter().collect();
    }
    let cache = cache_dir.unwrap_or_else(images::default_cache_dir);
    let mut progress = |line: &str| println!("{line}");
    for r in recipes {
        let started = std::time::Instant::now();
        if let Err(e) = images::build(engine, r, &cache, rebuild, &mut progress).await {
            eprintln!("sandboxd images: {}: {e}", r.name);
            return 1;
        }
        println!(
            "{}: done in {:.1} s",
            r.name,
            started.elapsed().as_secs_f64()
        );
    }
    0
}

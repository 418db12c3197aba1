//! `sandboxd images build|list`: the Docker runtime's images, built here from Debian's
//! packages (see wasmsand-docker's `images`).

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
    /// Build images from Debian's packages (all when none is named): python, node, go, java,
    /// generic. An image whose recipe is unchanged is not built again; a root filesystem kept
    /// in the cache is only imported
    Build {
        /// Images to build
        names: Vec<String>,
        /// Where root filesystems and downloaded packages are kept (default:
        /// $XDG_CACHE_HOME/wasmsand/images)
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// Build even when an image of the same recipe exists
        #[arg(long)]
        rebuild: bool,
    },
    /// List the images and whether the engine has them
    List,
}

pub fn run(args: ImagesArgs) -> u8 {
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
            } => build(&engine, names, cache_dir, rebuild).await,
        }
    })
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

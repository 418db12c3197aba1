//! Host tools: functions of the embedder that guest code calls (`from host import tools` in
//! `python3`), each call counted against the run's `tool_calls` limit.

use std::sync::Arc;

use serde_json::Value;
use wasmsand_exec::ToolChannel;

pub use wasmsand_cpython::{Tool, ToolHandler, ToolSetError};

use crate::Sandbox;

impl Sandbox {
    /// Offers `handler` to guest code as `name`: in `python3`, `from host import tools;
    /// tools.name(key=value, ...)` calls it with the keyword arguments as a JSON object and
    /// returns its JSON result. An `Err(message)` raises `host.ToolError(message)` in the
    /// guest, which sees nothing else of the host. Registering a name again replaces it. Later
    /// forks carry the sandbox's tools.
    pub fn register_tool(
        &self,
        name: &str,
        description: &str,
        handler: impl Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Result<(), ToolSetError> {
        self.add_tool(Tool {
            name: name.to_string(),
            description: description.to_string(),
            input_schema: None,
            handler: Arc::new(handler),
        })
    }

    /// As [`Self::register_tool`], with every field given (an input schema makes the guest's
    /// function carry the schema's parameters, as MCP tools describe them).
    pub fn add_tool(&self, tool: Tool) -> Result<(), ToolSetError> {
        self.tools.lock().insert(tool)
    }

    /// Withdraws a tool; `false` if there was none of that name.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.tools.lock().remove(name)
    }

    /// The names of the registered tools, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.lock().names().map(str::to_string).collect()
    }

    /// The tool-call channel of one run: the tools as registered now, and a fresh budget of
    /// `limits.tool_calls` shared by every program of the command line. No tools, no channel:
    /// the guest's `import host.tools` then fails with "this run has no tools".
    pub(crate) fn tool_channel(&self) -> Option<ToolChannel> {
        self.metered_tool_channel().0
    }

    /// [`Self::tool_channel`], and the meter of the run's network use when it has a network.
    pub(crate) fn metered_tool_channel(
        &self,
    ) -> (Option<ToolChannel>, Option<Arc<crate::net::NetMeter>>) {
        let tools = self.tools.lock();
        let network = self.network.lock().clone();
        if tools.is_empty() && network.is_none() {
            return (None, None);
        }
        let (handler, meter): (Arc<dyn wasmsand_exec::ToolCallHandler>, _) = match network {
            None => (Arc::new(tools.handler()), None),
            Some(net) => {
                let door = crate::net::Door::new(net);
                let meter = door.meter.clone();
                (
                    Arc::new(crate::net::Channel {
                        tools: tools.handler(),
                        door,
                    }),
                    Some(meter),
                )
            }
        };
        (
            Some(ToolChannel::new(handler, self.limits.tool_calls)),
            meter,
        )
    }

    /// Sets what the sandbox may reach on the network from its next run on (`None`: nothing).
    pub fn set_network(&self, network: Option<crate::Network>) {
        *self.network.lock() = network;
    }

    /// The network policy in force.
    pub fn network(&self) -> Option<crate::Network> {
        self.network.lock().clone()
    }
}

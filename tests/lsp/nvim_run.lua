-- Neovim's own LSP client (0.7+) against `sandboxd lsp`: the code lens of app/main.py, its
-- command through workspace/executeCommand, the diagnostics Neovim collected, then a re-run
-- after a fix. What it saw goes to $LSP_OUT as JSON; test_nvim.py checks it.
local sandboxd = os.getenv("WASMSAND_SANDBOXD_BIN")
local root = os.getenv("LSP_ROOT")
local out = os.getenv("LSP_OUT")
local seen = { finished = {}, errors = {} }

local function save_and_quit()
  local f = io.open(out, "w")
  f:write(vim.fn.json_encode(seen))
  f:close()
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  local id = vim.lsp.start_client({
    cmd = { sandboxd, "lsp" },
    root_dir = root,
    name = "wasmsand",
    handlers = {
      ["tldw/sandbox/runFinished"] = function(_, params)
        table.insert(seen.finished, params)
      end,
    },
  })
  vim.cmd("edit " .. vim.fn.fnameescape(root .. "/app/main.py"))
  local buf = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(buf, id)
  local client = vim.lsp.get_client_by_id(id)
  assert(vim.wait(120000, function()
    return client.server_capabilities ~= nil and client.server_capabilities.executeCommandProvider ~= nil
  end, 50), "the server did not initialize")
  seen.commands = client.server_capabilities.executeCommandProvider.commands

  local uri = vim.uri_from_bufnr(buf)
  local lenses = client.request_sync("textDocument/codeLens", { textDocument = { uri = uri } }, 30000, buf)
  seen.lenses = lenses.result
  local lens = lenses.result[1]
  local started = client.request_sync("workspace/executeCommand", {
    command = lens.command.command,
    arguments = lens.command.arguments,
  }, 120000, buf)
  seen.started = started.result
  table.insert(seen.errors, started.err)
  assert(vim.wait(180000, function() return #seen.finished >= 1 end, 100), "no runFinished")

  local lib = vim.uri_to_bufnr(vim.uri_from_fname(root .. "/app/lib.py"))
  seen.failing = vim.diagnostic.get(lib)

  -- The fix, made on disk as another tool would, then the last run again (no arguments).
  local f = io.open(root .. "/app/lib.py", "w")
  f:write("def work(n):\n    print('fixed', n)\n")
  f:close()
  local again = client.request_sync("workspace/executeCommand", { command = "tldw.sandbox.run", arguments = {} }, 120000, buf)
  table.insert(seen.errors, again.err)
  assert(vim.wait(180000, function() return #seen.finished >= 2 end, 100), "no second runFinished")
  vim.wait(500)
  seen.passing = vim.diagnostic.get(lib)

  local bad = client.request_sync("workspace/executeCommand", { command = "tldw.sandbox.nope", arguments = {} }, 30000, buf)
  seen.unknown = bad.err
  vim.lsp.stop_client(id)
end)
if not ok then
  seen.lua_error = tostring(err)
end
save_and_quit()

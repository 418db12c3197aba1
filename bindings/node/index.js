'use strict';
// wasmsand for Node: WebAssembly sandboxes for LLM agents (docs/node.md).
const errors = require('./lib/errors');
const { Sandbox, CommandHandle, LIMIT_NAMES } = require('./lib/sandbox');
const { loadNative } = require('./lib/native');

exports.Sandbox = Sandbox;
exports.CommandHandle = CommandHandle;
exports.SandboxError = errors.SandboxError;
exports.ProcessNotFoundError = errors.ProcessNotFoundError;
exports.WaitTimeoutError = errors.WaitTimeoutError;
exports.LimitExceededError = errors.LimitExceededError;
exports.SandboxDestroyedError = errors.SandboxDestroyedError;
exports.InvalidParamsError = errors.InvalidParamsError;
exports.NotSupportedError = errors.NotSupportedError;
exports.MergeConflictError = errors.MergeConflictError;
exports.FileSystemError = errors.FileSystemError;
exports.CommandExitError = errors.CommandExitError;
exports.LIMIT_NAMES = LIMIT_NAMES;

/** The limits registry of the native part: `[{name, wire, default, unit, doc}]`. */
exports.limitSpecs = function limitSpecs() {
  return JSON.parse(loadNative().limitSpecs());
};

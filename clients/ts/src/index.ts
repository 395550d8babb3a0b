export * from "./client.js";
export * from "./errors.js";
export * from "./receiver.js";
export * from "./types.js";

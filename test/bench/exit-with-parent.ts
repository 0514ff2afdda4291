// Preloaded into every bench child (--import): when the bench process goes away, even by
// SIGKILL, its IPC channel closes and the child shuts down as on SIGTERM instead of lingering.
if (process.send) {
  process.channel?.unref();
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}

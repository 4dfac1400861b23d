// The native stack of a process that dies of a fault, on stderr: loaded with
// LD_PRELOAD by bench/cuda_mlx_run_device.sh (SEGV_TRACE=1) to find where the
// SIGSEGV at the first assertRaises of some of MLX's tests on the H200 happened
// (it found it in session 21: the module's static libstdc++, bench/cuda_stdcxx.sh).
// Python's faulthandler prints only Python frames; it restores the handler it
// replaced (this one) and raises the signal again, so both stacks are printed.
//
// It writes to a copy of the process's stderr taken at load time: pytest
// points fd 2 at a capture file while a test runs, and that file is lost when
// the process dies (faulthandler, too, writes to the stderr pytest started with).
//
// Build: cc -shared -fPIC -O1 -o segv_backtrace.so bench/segv_backtrace.c
// (glibc's backtrace(), which unwinds through the signal frame).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static char alt_stack[1 << 16];
static int out_fd = STDERR_FILENO;

static void say(const char* s) {
  ssize_t unused = write(out_fd, s, strlen(s));
  (void)unused;
}

// Where an address lies: module, offset in it, nearest dynamic symbol.
__attribute__((unused)) static void where(const char* what, void* addr) {
  char line[512];
  Dl_info info;
  if (dladdr(addr, &info) && info.dli_fname) {
    snprintf(
        line, sizeof line, "segv_backtrace: %s %p = %s+%#lx (%s)\n", what, addr,
        info.dli_fname, (unsigned long)((char*)addr - (char*)info.dli_fbase),
        info.dli_sname ? info.dli_sname : "?");
  } else {
    snprintf(line, sizeof line, "segv_backtrace: %s %p (no module)\n", what, addr);
  }
  say(line);
}

static void on_fault(int sig, siginfo_t* info, void* context) {
  // SA_RESETHAND: a fault in here ends the process with the default action.
  char line[128];
  snprintf(line, sizeof line, "segv_backtrace: signal %d (%s)\n", sig, strsignal(sig));
  say(line);
  if (info->si_code > 0) {  // a fault, not raise(): faulthandler raises again
    snprintf(line, sizeof line, "segv_backtrace: fault address %p\n", info->si_addr);
    say(line);
#if defined(__x86_64__)
    where("pc", (void*)((const ucontext_t*)context)->uc_mcontext.gregs[REG_RIP]);
#endif
  } else {
    say("segv_backtrace: raised again (by faulthandler): the faulting frame is the one "
        "after the second signal frame below\n");
  }
  void* frames[128];
  int depth = backtrace(frames, 128);
  backtrace_symbols_fd(frames, depth, out_fd);
  say("segv_backtrace: end\n");
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  // backtrace() loads libgcc_s on first use; not in a signal handler.
  void* warm[1];
  backtrace(warm, 1);
  int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 100);
  if (fd >= 0) {
    out_fd = fd;
  }
  stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; ++i) {
    sigaction(signals[i], &sa, NULL);
  }
}

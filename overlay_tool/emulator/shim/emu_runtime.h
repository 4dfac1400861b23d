// mlx-overlay Metal SIMT emulator: the lane scheduler.
//
// Every thread of a threadgroup runs as a fiber (its own stack) on the one OS
// thread that executes the launch. A fiber runs until it reaches a collective
// (simd_sum, simd_shuffle_*, simdgroup_barrier, threadgroup_barrier) or
// returns; the scheduler then checks that all 32 lanes of the simdgroup (all
// threads of the threadgroup for a threadgroup barrier) stand at the same
// collective (same operation, value type, source line and per-lane collective
// count), computes the collective in a fixed order, and resumes the lanes.
// A lane that has returned, or stands at a different collective, while its
// simdgroup waits is reported as divergence (an error, never a hang).
//
// Context switch: hand-written x86-64 (callee-saved registers, MXCSR and the
// x87 control word); other architectures (or -DEMU_USE_UCONTEXT) use ucontext,
// whose swapcontext makes a sigprocmask system call per switch.
//
// This header is included before the Metal address-space words are defined.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <csetjmp>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) && !defined(EMU_USE_UCONTEXT)
#define EMU_X86_FIBERS 1
#else
#include <ucontext.h>
#endif

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace emu {

enum LaneState : int { RUNNABLE = 0, AT_SIMD = 1, AT_TG_BARRIER = 2, DONE = 3 };

struct Lane;
// Resolves one collective over the n lanes of a simdgroup (all present).
using ResolveFn = void (*)(Lane* lanes, int n);

struct Lane {
  void* sp = nullptr; // saved stack pointer (x86-64) while switched out
#if !EMU_X86_FIBERS
  ucontext_t uc;
#endif
  int state = RUNNABLE;
  unsigned seq = 0; // collectives reached so far
  ResolveFn resolve = nullptr;
  const char* op_name = "";
  const char* file = "";
  int line = 0;
  int iarg = 0; // delta / mask / source lane
  alignas(16) unsigned char in[16];
  alignas(16) unsigned char out[16];
  unsigned tx = 0, ty = 0, tz = 0; // thread_position_in_threadgroup
  unsigned simd_gid = 0, simd_lid = 0;
};

using BodyFn = void (*)(void* user, unsigned gx, unsigned gy, unsigned gz,
                        const Lane* lane);

struct Ctx {
  Lane* lanes = nullptr;
  int nthreads = 0;
  int nsimd = 0;
  void* sched_sp = nullptr;
#if !EMU_X86_FIBERS
  ucontext_t sched_uc;
#endif
  Lane* cur = nullptr;
  BodyFn body = nullptr;
  void* user = nullptr;
  unsigned gx = 0, gy = 0, gz = 0; // threadgroup_position_in_grid
  char* stacks = nullptr;
  size_t stack_size = 0;
  size_t stack_stride = 0;
  size_t stacks_len = 0;
  char* err = nullptr;
  int errlen = 0;
};

inline thread_local Ctx* g_ctx = nullptr;

#if EMU_X86_FIBERS
extern "C" void emu_swap_ctx(void** save_sp, void* to_sp);
extern "C" void emu_fiber_trampoline();
asm(R"(
  .text
  .p2align 4
  .type emu_swap_ctx,@function
  .hidden emu_swap_ctx
  .weak emu_swap_ctx
emu_swap_ctx:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_swap_ctx, .-emu_swap_ctx

  .p2align 4
  .type emu_fiber_trampoline,@function
  .hidden emu_fiber_trampoline
  .weak emu_fiber_trampoline
emu_fiber_trampoline:
  movq %r12, %rdi
  andq $-16, %rsp
  call *%r13
  ud2
  .size emu_fiber_trampoline, .-emu_fiber_trampoline
)");
#endif

[[noreturn]] inline void fiber_main(Lane* L);

inline void fiber_entry_c(Lane* L) { fiber_main(L); }
#if !EMU_X86_FIBERS
inline void fiber_entry_uc(unsigned hi, unsigned lo) {
  Lane* L = (Lane*)(((uintptr_t)hi << 32) | (uintptr_t)lo);
  fiber_main(L);
}
#endif

// Switch from the running lane back to the scheduler.
inline void yield_lane(Lane* L) {
  Ctx* c = g_ctx;
#if EMU_X86_FIBERS
  emu_swap_ctx(&L->sp, c->sched_sp);
#else
  swapcontext(&L->uc, &c->sched_uc);
#endif
}

// Switch from the scheduler into lane L until it yields or finishes.
inline void run_lane(Lane* L) {
  Ctx* c = g_ctx;
  c->cur = L;
#if EMU_X86_FIBERS
  emu_swap_ctx(&c->sched_sp, L->sp);
#else
  swapcontext(&c->sched_uc, &L->uc);
#endif
  c->cur = nullptr;
}

[[noreturn]] inline void fiber_main(Lane* L) {
  Ctx* c = g_ctx;
  c->body(c->user, c->gx, c->gy, c->gz, L);
  L->state = DONE;
  yield_lane(L);
  __builtin_trap();
}

inline void init_fiber(Ctx* c, int i) {
  Lane* L = &c->lanes[i];
  char* base = c->stacks + i * c->stack_stride + 4096; // above the guard page
  char* top = base + c->stack_size;
#if EMU_X86_FIBERS
  uint64_t* sp = (uint64_t*)(((uintptr_t)top) & ~(uintptr_t)15);
  *--sp = 0; // padding
  *--sp = (uint64_t)(uintptr_t)&emu_fiber_trampoline; // ret address
  *--sp = 0; // rbp
  *--sp = 0; // rbx
  *--sp = (uint64_t)(uintptr_t)L; // r12: argument
  *--sp = (uint64_t)(uintptr_t)&fiber_entry_c; // r13: entry
  *--sp = 0; // r14
  *--sp = 0; // r15
  --sp; // mxcsr + x87 control word
  uint32_t mx = 0x1F80; // all exceptions masked, round to nearest, no FTZ/DAZ
  uint16_t cw = 0x037F;
  std::memcpy(sp, &mx, 4);
  std::memcpy((char*)sp + 4, &cw, 2);
  L->sp = sp;
#else
  getcontext(&L->uc);
  L->uc.uc_stack.ss_sp = base;
  L->uc.uc_stack.ss_size = c->stack_size;
  L->uc.uc_link = nullptr;
  uintptr_t p = (uintptr_t)L;
  makecontext(&L->uc, (void (*)())fiber_entry_uc, 2, (unsigned)(p >> 32),
              (unsigned)(p & 0xffffffffu));
#endif
}

inline void fail(Ctx* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline void fail(Ctx* c, const char* fmt, ...) {
  if (!c->err || c->errlen <= 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(c->err, c->errlen, fmt, ap);
  va_end(ap);
}

inline const char* state_name(int s) {
  switch (s) {
    case RUNNABLE: return "running";
    case AT_SIMD: return "at a simdgroup collective";
    case AT_TG_BARRIER: return "at threadgroup_barrier";
    case DONE: return "returned";
  }
  return "?";
}

// Describe the divergence of simdgroup lanes [first, first + n).
inline void report_divergence(Ctx* c, Lane* lanes, int n, const char* what) {
  const Lane* ref = nullptr;
  for (int i = 0; i < n; i++)
    if (lanes[i].state == AT_SIMD || lanes[i].state == AT_TG_BARRIER) {
      ref = &lanes[i];
      break;
    }
  int counts[4] = {0, 0, 0, 0};
  const Lane* odd = nullptr;
  for (int i = 0; i < n; i++) {
    counts[lanes[i].state]++;
    if (!odd && ref &&
        (lanes[i].state != ref->state || lanes[i].resolve != ref->resolve ||
         lanes[i].line != ref->line || lanes[i].seq != ref->seq))
      odd = &lanes[i];
  }
  if (!ref) {
    fail(c, "emulator: internal scheduler error (%s)", what);
    return;
  }
  char oddbuf[256] = "";
  if (odd) {
    if (odd->state == DONE)
      std::snprintf(oddbuf, sizeof oddbuf, "lane %u had returned", odd->simd_lid);
    else
      std::snprintf(oddbuf, sizeof oddbuf,
                    "lane %u was %s %s at %s:%d (collective #%u)",
                    odd->simd_lid, state_name(odd->state), odd->op_name,
                    odd->file, odd->line, odd->seq);
  }
  fail(c,
       "divergent lanes at a collective (%s): threadgroup (%u,%u,%u) simdgroup "
       "%u: lane %u reached %s at %s:%d (collective #%u) but %s "
       "[%d lanes there, %d at other collectives/barriers, %d returned]",
       what, c->gx, c->gy, c->gz, ref->simd_gid, ref->simd_lid, ref->op_name,
       ref->file, ref->line, ref->seq, oddbuf, counts[ref->state],
       counts[AT_SIMD] + counts[AT_TG_BARRIER] - counts[ref->state],
       counts[DONE]);
}

// Run one threadgroup to completion. Returns 0 or -1 (message in c->err).
inline int run_threadgroup(Ctx* c) {
  const int nt = c->nthreads;
  for (int i = 0; i < nt; i++) {
    Lane* L = &c->lanes[i];
    L->state = RUNNABLE;
    L->seq = 0;
    init_fiber(c, i);
  }
  for (int i = 0; i < nt; i++) run_lane(&c->lanes[i]);
  for (;;) {
    bool progress = false;
    int n_done = 0, n_bar = 0;
    for (int g = 0; g < c->nsimd; g++) {
      Lane* lanes = c->lanes + g * 32;
      const int n = std::min(32, nt - g * 32);
      int n_simd = 0, n_g_done = 0, n_g_bar = 0;
      for (int i = 0; i < n; i++) {
        n_simd += lanes[i].state == AT_SIMD;
        n_g_done += lanes[i].state == DONE;
        n_g_bar += lanes[i].state == AT_TG_BARRIER;
      }
      n_done += n_g_done;
      n_bar += n_g_bar;
      if (n_simd == 0) continue;
      if (n_simd != n) {
        report_divergence(c, lanes, n, "not all 32 lanes arrived");
        return -1;
      }
      const Lane& r = lanes[0];
      for (int i = 1; i < n; i++) {
        const Lane& l = lanes[i];
        if (l.resolve != r.resolve || l.line != r.line || l.seq != r.seq ||
            std::strcmp(l.file, r.file) != 0) {
          report_divergence(c, lanes, n, "lanes at different collectives");
          return -1;
        }
      }
      r.resolve(lanes, n);
      for (int i = 0; i < n; i++) lanes[i].state = RUNNABLE;
      for (int i = 0; i < n; i++) run_lane(&lanes[i]);
      progress = true;
    }
    if (progress) continue;
    if (n_done == nt) return 0;
    if (n_bar + n_done == nt) {
      if (n_done > 0) {
        // Some threads returned while others wait at a threadgroup barrier.
        for (int g = 0; g < c->nsimd; g++) {
          Lane* lanes = c->lanes + g * 32;
          const int n = std::min(32, nt - g * 32);
          for (int i = 0; i < n; i++)
            if (lanes[i].state == AT_TG_BARRIER) {
              fail(c,
                   "divergent threads at threadgroup_barrier: threadgroup "
                   "(%u,%u,%u): thread (%u,%u,%u) waits at %s:%d but %d "
                   "threads of the threadgroup had returned",
                   c->gx, c->gy, c->gz, lanes[i].tx, lanes[i].ty, lanes[i].tz,
                   lanes[i].file, lanes[i].line, n_done);
              return -1;
            }
        }
      }
      const Lane& r = c->lanes[0];
      for (int i = 1; i < nt; i++) {
        const Lane& l = c->lanes[i];
        if (l.line != r.line || l.seq != r.seq || std::strcmp(l.file, r.file)) {
          fail(c,
               "divergent threads at threadgroup_barrier: threadgroup "
               "(%u,%u,%u): thread %d waits at %s:%d (collective #%u), thread "
               "%d at %s:%d (collective #%u)",
               c->gx, c->gy, c->gz, 0, r.file, r.line, r.seq, i, l.file, l.line,
               l.seq);
          return -1;
        }
      }
      for (int i = 0; i < nt; i++) c->lanes[i].state = RUNNABLE;
      for (int i = 0; i < nt; i++) run_lane(&c->lanes[i]);
      continue;
    }
    fail(c, "emulator: internal scheduler error (no progress)");
    return -1;
  }
}

// --- out-of-bounds and stack-overflow detection ------------------------------
// Buffers handed to a kernel are copied into mappings that end at a
// PROT_NONE page; fiber stacks sit above a PROT_NONE page. A SIGSEGV/SIGBUS
// (or the SIGALRM of the launch timeout)
// during a launch jumps back to the launcher, which reports it.
inline thread_local sigjmp_buf* g_fault_jmp = nullptr;
inline thread_local void* g_fault_addr = nullptr;

inline void fault_handler(int sig, siginfo_t* info, void*) {
  if (sig == SIGALRM && !g_fault_jmp) return; // a stale timer tick: ignore
  if (g_fault_jmp) {
    g_fault_addr = info->si_addr;
    sigjmp_buf* j = g_fault_jmp;
    g_fault_jmp = nullptr;
    siglongjmp(*j, sig);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

struct Guarded {
  char* map = nullptr;
  size_t map_len = 0;
  char* data = nullptr; // data + len == start of the guard page
  size_t len = 0;
};

inline bool guarded_alloc(Guarded& g, size_t len) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t body = (len + page - 1) / page * page;
  if (body == 0) body = page;
  g.map_len = body + 2 * page;
  void* m = mmap(nullptr, g.map_len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  g.map = (char*)m;
  mprotect(g.map, page, PROT_NONE);
  mprotect(g.map + page + body, page, PROT_NONE);
  g.len = len;
  // End exactly at the trailing guard page, aligned down to 16 bytes only if
  // that keeps the end adjacent (len a multiple of 16) -- otherwise end-exact.
  g.data = g.map + page + body - len;
  return true;
}

inline void guarded_free(Guarded& g) {
  if (g.map) munmap(g.map, g.map_len);
  g = Guarded{};
}

struct Buffer {
  const char* name;
  Guarded g;
};

inline const char* describe_addr(const Buffer* bufs, int nb, const void* a,
                                 char* out, size_t outlen, const Ctx* c) {
  const char* p = (const char*)a;
  for (int i = 0; i < nb; i++) {
    const Guarded& g = bufs[i].g;
    if (!g.map) continue;
    if (p >= g.map && p < g.map + g.map_len) {
      long off = (long)(p - g.data);
      std::snprintf(out, outlen, "buffer '%s' at byte offset %ld (size %zu)",
                    bufs[i].name, off, g.len);
      return out;
    }
  }
  if (c->stacks && p >= c->stacks && p < c->stacks + c->stacks_len) {
    std::snprintf(out, outlen, "a lane stack guard page (stack overflow)");
    return out;
  }
  std::snprintf(out, outlen, "an address outside every buffer");
  return out;
}

// Launch `body` over grid x threadgroup. Buffers are given as (host pointer,
// bytes, copy_in, copy_out); the body receives the guarded copies through
// `dev` (filled here before the first threadgroup runs).
struct HostBuf {
  const char* name;
  void* host;
  size_t bytes;
  int copy_in;
  int copy_out;
};

// timeout_ms > 0: a launch still running after that long (a lane in an
// endless loop) is stopped by SIGALRM and reported.
inline int launch(BodyFn body, void* user, void** dev, HostBuf* hb, int nbuf,
                  unsigned gx, unsigned gy, unsigned gz, unsigned tgx,
                  unsigned tgy, unsigned tgz, char* err, int errlen,
                  long timeout_ms = 0) {
  if (errlen > 0) err[0] = 0;
  const long nt = (long)tgx * tgy * tgz;
  if (nt <= 0 || nt > 1024) {
    std::snprintf(err, errlen, "threadgroup size %ux%ux%u is not in 1..1024",
                  tgx, tgy, tgz);
    return -1;
  }
  Ctx c;
  c.err = err;
  c.errlen = errlen;
  c.nthreads = (int)nt;
  c.nsimd = (int)((nt + 31) / 32);
  c.body = body;
  c.user = user;
  Lane* lanes = new Lane[nt];
  c.lanes = lanes;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  c.stack_size = 256 * 1024;
  c.stack_stride = c.stack_size + page;
  c.stacks_len = c.stack_stride * nt + page;
  void* st = mmap(nullptr, c.stacks_len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (st == MAP_FAILED) {
    delete[] lanes;
    std::snprintf(err, errlen, "cannot map lane stacks");
    return -1;
  }
  c.stacks = (char*)st;
  for (long i = 0; i < nt; i++) mprotect(c.stacks + i * c.stack_stride, page, PROT_NONE);
  for (long i = 0; i < nt; i++) {
    long lin = i;
    lanes[i].tx = (unsigned)(lin % tgx);
    lanes[i].ty = (unsigned)((lin / tgx) % tgy);
    lanes[i].tz = (unsigned)(lin / ((long)tgx * tgy));
    lanes[i].simd_gid = (unsigned)(lin / 32);
    lanes[i].simd_lid = (unsigned)(lin % 32);
  }
  Buffer* bufs = new Buffer[nbuf > 0 ? nbuf : 1];
  int rc = 0;
  for (int i = 0; i < nbuf; i++) {
    bufs[i].name = hb[i].name;
    if (!guarded_alloc(bufs[i].g, hb[i].bytes)) {
      std::snprintf(err, errlen, "cannot map buffer '%s'", hb[i].name);
      rc = -1;
    } else {
      if (hb[i].copy_in && hb[i].bytes) std::memcpy(bufs[i].g.data, hb[i].host, hb[i].bytes);
      dev[i] = bufs[i].g.data;
    }
  }

  struct sigaction sa, old_segv, old_bus, old_alrm;
  timer_t timer{};
  bool have_timer = false;
  stack_t ss, old_ss;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  const size_t alt_len = 64 * 1024;
  void* alt = std::malloc(alt_len);
  ss.ss_sp = alt;
  ss.ss_size = alt_len;
  ss.ss_flags = 0;
  sigaltstack(&ss, &old_ss);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  if (timeout_ms > 0) {
    // A timer whose SIGALRM goes to this thread only (other threads, e.g.
    // a BLAS pool, never see it).
    sigaction(SIGALRM, &sa, &old_alrm);
    struct sigevent sev;
    std::memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0) {
      have_timer = true;
      struct itimerspec its;
      std::memset(&its, 0, sizeof its);
      its.it_value.tv_sec = timeout_ms / 1000;
      its.it_value.tv_nsec = (timeout_ms % 1000) * 1000000L;
      timer_settime(timer, 0, &its, nullptr);
    }
  }

  Ctx* prev = g_ctx;
  g_ctx = &c;
  sigjmp_buf jb;
  unsigned cx = 0, cy = 0, cz = 0;
  if (rc == 0) {
    int sig = sigsetjmp(jb, 1);
    if (sig == 0) {
      g_fault_jmp = &jb;
      for (cz = 0; cz < gz && rc == 0; cz++)
        for (cy = 0; cy < gy && rc == 0; cy++)
          for (cx = 0; cx < gx && rc == 0; cx++) {
            c.gx = cx;
            c.gy = cy;
            c.gz = cz;
            rc = run_threadgroup(&c);
          }
      g_fault_jmp = nullptr;
    } else if (sig == SIGALRM) {
      const Lane* L = c.cur;
      std::snprintf(err, errlen,
                    "the kernel did not finish within %.1f s (a lane in an endless "
                    "loop?): stopped in threadgroup (%u,%u,%u) thread (%u,%u,%u)",
                    timeout_ms / 1000.0, c.gx, c.gy, c.gz, L ? L->tx : 0u,
                    L ? L->ty : 0u, L ? L->tz : 0u);
      rc = -1;
    } else {
      char where[160];
      const Lane* L = c.cur;
      describe_addr(bufs, nbuf, g_fault_addr, where, sizeof where, &c);
      std::snprintf(err, errlen,
                    "%s in the kernel: threadgroup (%u,%u,%u) thread (%u,%u,%u) "
                    "touched %s",
                    sig == SIGSEGV ? "invalid memory access (SIGSEGV)"
                                   : "bus error (SIGBUS)",
                    c.gx, c.gy, c.gz, L ? L->tx : 0u, L ? L->ty : 0u,
                    L ? L->tz : 0u, where);
      rc = -1;
    }
  }
  g_ctx = prev;
  if (have_timer) timer_delete(timer);
  if (timeout_ms > 0) sigaction(SIGALRM, &old_alrm, nullptr);
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  sigaltstack(&old_ss, nullptr);
  std::free(alt);

  for (int i = 0; i < nbuf; i++) {
    if (rc == 0 && hb[i].copy_out && bufs[i].g.map && hb[i].bytes)
      std::memcpy(hb[i].host, bufs[i].g.data, hb[i].bytes);
    guarded_free(bufs[i].g);
  }
  delete[] bufs;
  munmap(c.stacks, c.stacks_len);
  delete[] lanes;
  return rc;
}

// --- collectives ---------------------------------------------------------------
inline Lane* current_lane(const char* op, const char* file, int line) {
  Ctx* c = g_ctx;
  if (!c || !c->cur) {
    std::fprintf(stderr, "emulator: %s called outside a kernel launch at %s:%d\n",
                 op, file, line);
    std::abort();
  }
  return c->cur;
}

template <typename T>
inline T collective(ResolveFn fn, const char* op, T v, int iarg, const char* file,
                    int line, int state = AT_SIMD) {
  static_assert(sizeof(T) <= 16, "collective value too large");
  Lane* L = current_lane(op, file, line);
  std::memcpy(L->in, &v, sizeof(T));
  L->iarg = iarg;
  L->resolve = fn;
  L->op_name = op;
  L->file = file;
  L->line = line;
  L->seq++;
  L->state = state;
  yield_lane(L);
  T r;
  std::memcpy(&r, L->out, sizeof(T));
  return r;
}

template <typename T>
inline T lane_in(const Lane* lanes, int i) {
  T v;
  std::memcpy(&v, lanes[i].in, sizeof(T));
  return v;
}
template <typename T>
inline void lane_out(Lane* lanes, int i, T v) {
  std::memcpy(lanes[i].out, &v, sizeof(T));
}

#ifndef EMU_SIMD_SUM_ORDER
#define EMU_SIMD_SUM_ORDER 0
#endif

// simd_sum: EMU_SIMD_SUM_ORDER 0 (default) = the shuffle-down ladder
//   v[i] += v[i + 16] (i < 16); v[i] += v[i + 8] (i < 8); ... v[0] += v[1]
// each addition in T's precision (one rounding), result broadcast;
// 1 = sequential ((v0 + v1) + v2) + ... + v31;
// 2 = xor butterfly (lane 0's value of v[i] += v[i ^ m], m = 16, 8, 4, 2, 1;
//   identical to 0 for commutative addition, kept for documentation);
// 3 = reverse sequential ((v31 + v30) + ...) + v0.
template <typename T>
inline void resolve_sum(Lane* lanes, int n) {
  T v[32];
  for (int i = 0; i < n; i++) v[i] = lane_in<T>(lanes, i);
  for (int i = n; i < 32; i++) v[i] = T(0);
  T r;
#if EMU_SIMD_SUM_ORDER == 1
  r = v[0];
  for (int i = 1; i < 32; i++) r = r + v[i];
#elif EMU_SIMD_SUM_ORDER == 3
  r = v[31];
  for (int i = 30; i >= 0; i--) r = r + v[i];
#else
  for (int off = 16; off >= 1; off >>= 1)
    for (int i = 0; i < off; i++) v[i] = v[i] + v[i + off];
  r = v[0];
#endif
  for (int i = 0; i < n; i++) lane_out<T>(lanes, i, r);
}

template <typename T>
inline void resolve_max(Lane* lanes, int n) {
  T r = lane_in<T>(lanes, 0);
  for (int i = 1; i < n; i++) {
    T v = lane_in<T>(lanes, i);
    r = (v > r) ? v : r;
  }
  for (int i = 0; i < n; i++) lane_out<T>(lanes, i, r);
}

template <typename T>
inline void resolve_min(Lane* lanes, int n) {
  T r = lane_in<T>(lanes, 0);
  for (int i = 1; i < n; i++) {
    T v = lane_in<T>(lanes, i);
    r = (v < r) ? v : r;
  }
  for (int i = 0; i < n; i++) lane_out<T>(lanes, i, r);
}

// Metal: "the upper delta lanes remain unchanged" (they get their own value).
template <typename T>
inline void resolve_shuffle_down(Lane* lanes, int n) {
  for (int i = 0; i < n; i++) {
    int src = i + lanes[i].iarg;
    lane_out<T>(lanes, i, lane_in<T>(lanes, (src < n && src >= 0) ? src : i));
  }
}
template <typename T>
inline void resolve_shuffle_up(Lane* lanes, int n) {
  for (int i = 0; i < n; i++) {
    int src = i - lanes[i].iarg;
    lane_out<T>(lanes, i, lane_in<T>(lanes, (src >= 0 && src < n) ? src : i));
  }
}
template <typename T>
inline void resolve_shuffle_xor(Lane* lanes, int n) {
  for (int i = 0; i < n; i++) {
    int src = (i ^ lanes[i].iarg) & 31;
    lane_out<T>(lanes, i, lane_in<T>(lanes, src < n ? src : i));
  }
}
template <typename T>
inline void resolve_shuffle(Lane* lanes, int n) {
  for (int i = 0; i < n; i++) {
    int src = lanes[i].iarg & 31;
    lane_out<T>(lanes, i, lane_in<T>(lanes, src < n ? src : i));
  }
}
template <typename T>
inline void resolve_prefix_exclusive_sum(Lane* lanes, int n) {
  T acc = T(0);
  for (int i = 0; i < n; i++) {
    T v = lane_in<T>(lanes, i);
    lane_out<T>(lanes, i, acc);
    acc = acc + v;
  }
}
template <typename T>
inline void resolve_prefix_inclusive_sum(Lane* lanes, int n) {
  T acc = T(0);
  for (int i = 0; i < n; i++) {
    acc = acc + lane_in<T>(lanes, i);
    lane_out<T>(lanes, i, acc);
  }
}
template <typename T>
inline void resolve_quad_sum(Lane* lanes, int n) {
  for (int q = 0; q < n; q += 4) {
    T v[4];
    for (int i = 0; i < 4; i++) v[i] = q + i < n ? lane_in<T>(lanes, q + i) : T(0);
    const T r = (v[0] + v[2]) + (v[1] + v[3]);
    for (int i = 0; i < 4 && q + i < n; i++) lane_out<T>(lanes, q + i, r);
  }
}
inline void resolve_nop(Lane*, int) {}

} // namespace emu

#include "server/http/shutdown_signals.h"

#include <pthread.h>
#include <signal.h>

namespace dsv4::server {
namespace {

// SIGUSR2 is used internally to stop the waiting thread.
sigset_t handled_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR2);
    return set;
}

}  // namespace

ShutdownSignals::ShutdownSignals(Handler handler) : handler_(std::move(handler)) {
    ::signal(SIGPIPE, SIG_IGN);
    const sigset_t set = handled_signals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    thread_ = std::thread([this] {
        const sigset_t waited = handled_signals();
        int count = 0;
        for (;;) {
            int signal_number = 0;
            if (sigwait(&waited, &signal_number) != 0) continue;
            if (signal_number == SIGUSR2) return;
            handler_(signal_number, ++count);
        }
    });
}

ShutdownSignals::~ShutdownSignals() {
    pthread_kill(thread_.native_handle(), SIGUSR2);
    thread_.join();
}

}  // namespace dsv4::server

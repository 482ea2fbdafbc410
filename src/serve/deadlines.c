// deadlines.c — see deadlines.h.
#include "serve/deadlines.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/clock.h"
#include "base/threads.h"

struct Watched {
    int fd;
    double due;             // now_seconds() by which the request must be whole; 0: none
    Watched *prev, *next;
};

// Closes every connection whose request is late, every `interval` seconds until deadlines_stop.
static void *watch(void *arg) {
    Deadlines *d = arg;
    const double interval = d->seconds / 10 < 1.0 ? d->seconds / 10 : 1.0;
    pthread_mutex_lock(&d->lock);
    while (!d->stopping) {
        const double now = now_seconds();
        for (Watched *w = d->first; w; w = w->next)
            if (w->due > 0 && now > w->due) {
                shutdown(w->fd, SHUT_RDWR);  // (the entry stays until the connection's thread lets it go)
                w->due = 0;
            }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        const long nanoseconds = until.tv_nsec + (long)(interval * 1e9);
        until.tv_sec += nanoseconds / 1000000000L;
        until.tv_nsec = nanoseconds % 1000000000L;
        pthread_cond_timedwait(&d->stop_signal, &d->lock, &until);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

int deadlines_start(Deadlines *d, double seconds, Err *err) {
    *d = (Deadlines){.seconds = seconds};
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->stop_signal, NULL);
    const int rc = thread_start(&d->thread, watch, d);
    if (rc) return err_fmt(err, "cannot start the thread that closes slow connections: %s", strerror(rc));
    return 0;
}

void deadlines_stop(Deadlines *d) {
    pthread_mutex_lock(&d->lock);
    d->stopping = true;
    pthread_cond_signal(&d->stop_signal);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    pthread_cond_destroy(&d->stop_signal);
    pthread_mutex_destroy(&d->lock);
}

Watched *deadlines_watch(Deadlines *d, int fd) {
    Watched *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_lock(&d->lock);
    *w = (Watched){.fd = fd, .due = now_seconds() + d->seconds, .next = d->first};
    if (d->first) d->first->prev = w;
    d->first = w;
    pthread_mutex_unlock(&d->lock);
    return w;
}

// Sets w's due time under the lock (0: none).
static void set_due(Deadlines *d, Watched *w, double due) {
    if (!w) return;
    pthread_mutex_lock(&d->lock);
    w->due = due;
    pthread_mutex_unlock(&d->lock);
}

void deadlines_arrived(Deadlines *d, Watched *w) { set_due(d, w, 0); }

void deadlines_rearm(Deadlines *d, Watched *w) { set_due(d, w, now_seconds() + d->seconds); }

void deadlines_forget(Deadlines *d, Watched *w) {
    if (!w) return;
    pthread_mutex_lock(&d->lock);
    if (w->prev) w->prev->next = w->next;
    else d->first = w->next;
    if (w->next) w->next->prev = w->prev;
    pthread_mutex_unlock(&d->lock);
    free(w);
}

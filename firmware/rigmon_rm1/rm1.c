/* RM1 window accumulation and formatting; see rm1.h. Plain C99, no printf, no floats. */
#include "rm1.h"

void rm1_window_init(rm1_window *w, const char *const *keys, size_t channels, uint32_t now_ms) {
    size_t k;
    if (channels > RM1_MAX_CHANNELS) channels = RM1_MAX_CHANNELS;
    w->channels = channels;
    for (k = 0; k < channels; k++) w->ch[k].key = keys[k];
    rm1_window_reset(w, now_ms, 0);
}

void rm1_window_reset(rm1_window *w, uint32_t now_ms, uint32_t carry_flags) {
    size_t k;
    for (k = 0; k < w->channels; k++) {
        w->ch[k].min = INT32_MAX;
        w->ch[k].max = INT32_MIN;
        w->ch[k].sum = 0;
    }
    w->n = 0;
    w->flags = carry_flags;
    w->start_ms = now_ms;
}

void rm1_window_add(rm1_window *w, const int32_t *values) {
    size_t k;
    for (k = 0; k < w->channels; k++) {
        rm1_channel *c = &w->ch[k];
        if (values[k] < c->min) c->min = values[k];
        if (values[k] > c->max) c->max = values[k];
        c->sum += values[k];
    }
    w->n++;
}

/* A small bounded writer: every append checks the room left. */
typedef struct {
    char *buf;
    size_t cap;
    size_t len;
    int overflow;
} rm1_out;

static void put_char(rm1_out *o, char ch) {
    if (o->len + 1 > o->cap || o->len + 1 > RM1_MAX_LINE) {
        o->overflow = 1;
        return;
    }
    o->buf[o->len++] = ch;
}

static void put_str(rm1_out *o, const char *s) {
    while (*s) put_char(o, *s++);
}

static void put_u32(rm1_out *o, uint32_t v) {
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (n) put_char(o, digits[--n]);
}

static void put_i32(rm1_out *o, int32_t v) {
    if (v < 0) {
        put_char(o, '-');
        put_u32(o, (uint32_t)(-(int64_t)v));
    } else {
        put_u32(o, (uint32_t)v);
    }
}

/* Close the frame: XOR of the bytes between '$' and '*', two uppercase hex digits, CRLF. */
static size_t finish(rm1_out *o) {
    static const char hex[] = "0123456789ABCDEF";
    unsigned char x = 0;
    size_t k;
    for (k = 1; k < o->len; k++) x ^= (unsigned char)o->buf[k];
    put_char(o, '*');
    put_char(o, hex[x >> 4]);
    put_char(o, hex[x & 15]);
    put_char(o, '\r');
    put_char(o, '\n');
    if (o->overflow) return 0;
    if (o->len < o->cap) o->buf[o->len] = '\0';
    return o->len;
}

size_t rm1_format_window(char *buf, size_t cap, const rm1_window *w, uint32_t seq, uint32_t now_ms) {
    rm1_out o = {buf, cap, 0, 0};
    size_t k;
    put_str(&o, "$RM1,seq=");
    put_u32(&o, seq);
    put_str(&o, ",up=");
    put_u32(&o, now_ms);
    put_str(&o, ",win=");
    put_u32(&o, now_ms - w->start_ms); /* unsigned: correct across the 49.7-day wrap */
    put_str(&o, ",n=");
    put_u32(&o, w->n);
    if (w->n > 0) {
        for (k = 0; k < w->channels; k++) {
            const rm1_channel *c = &w->ch[k];
            /* Integer mean rounded half away from zero; always within [min, max]. */
            int64_t half = (int64_t)(w->n / 2u);
            int64_t mean = c->sum >= 0 ? (c->sum + half) / (int64_t)w->n : (c->sum - half) / (int64_t)w->n;
            put_char(&o, ',');
            put_str(&o, c->key);
            put_char(&o, '=');
            put_i32(&o, (int32_t)mean);
            put_char(&o, '/');
            put_i32(&o, c->min);
            put_char(&o, '/');
            put_i32(&o, c->max);
        }
    }
    if (w->flags) {
        put_str(&o, ",flags=");
        put_u32(&o, w->flags);
    }
    return finish(&o);
}

size_t rm1_format_identity(char *buf, size_t cap, const char *fw, const char *id, const char *sensor,
                           uint32_t win_ms, const char *const *keys, size_t channels) {
    rm1_out o = {buf, cap, 0, 0};
    size_t k;
    put_str(&o, "$RMI,proto=1,fw=");
    put_str(&o, fw);
    put_str(&o, ",id=");
    put_str(&o, id);
    put_str(&o, ",sensor=");
    put_str(&o, sensor);
    put_str(&o, ",win=");
    put_u32(&o, win_ms);
    put_str(&o, ",ch=");
    for (k = 0; k < channels; k++) {
        if (k) put_char(&o, ';');
        put_str(&o, keys[k]);
    }
    return finish(&o);
}

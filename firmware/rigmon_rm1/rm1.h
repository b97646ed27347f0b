/* RM1 line protocol: window accumulation and record formatting in plain C (no printf, no floats).
 *
 * Shared by the Arduino/RP2040 sketch and rigmon's host test, which compiles this file with gcc
 * and parses its output with rigmon's own parser. See reference/psu-adc.md for the protocol.
 */
#ifndef RIGMON_RM1_H
#define RIGMON_RM1_H

#include <stddef.h>
#include <stdint.h>

#define RM1_MAX_LINE 200      /* bytes per line, terminator included */
#define RM1_MAX_CHANNELS 4

#define RM1_FLAG_READ_FAILED 1u
#define RM1_FLAG_CLIPPED 2u
#define RM1_FLAG_UNDER_VOLTAGE 4u
#define RM1_FLAG_OVERRUN 8u
#define RM1_FLAG_UNCALIBRATED 16u

/* Running min/max/sum of one channel (millivolts or milliamps) over a window. */
typedef struct {
    const char *key;   /* "v", "i", "vpsu": keys starting with v are mV, with i mA */
    int32_t min;
    int32_t max;
    int64_t sum;
} rm1_channel;

/* One window: every sample of every channel, plus the window's flags. */
typedef struct {
    rm1_channel ch[RM1_MAX_CHANNELS];
    size_t channels;
    uint32_t n;        /* samples taken (good reads) */
    uint32_t flags;
    uint32_t start_ms;
} rm1_window;

void rm1_window_init(rm1_window *w, const char *const *keys, size_t channels, uint32_t now_ms);
/* Add one sample: values[k] for channel k, in mV or mA. */
void rm1_window_add(rm1_window *w, const int32_t *values);
/* Restart the window at now_ms; flags not yet reported (overrun) can be carried over. */
void rm1_window_reset(rm1_window *w, uint32_t now_ms, uint32_t carry_flags);

/* Format "$RM1,seq=..,up=..,win=..,n=..,<key>=mean/min/max,...[,flags=F]*HH\r\n" into buf.
 * Returns the length written (without a NUL, which is added when room allows), or 0 when
 * the line would not fit in cap or in RM1_MAX_LINE. */
size_t rm1_format_window(char *buf, size_t cap, const rm1_window *w, uint32_t seq, uint32_t now_ms);

/* Format the identity line "$RMI,proto=1,fw=..,id=..,sensor=..,win=..,ch=v;i;vpsu*HH\r\n". */
size_t rm1_format_identity(char *buf, size_t cap, const char *fw, const char *id, const char *sensor,
                           uint32_t win_ms, const char *const *keys, size_t channels);

#endif

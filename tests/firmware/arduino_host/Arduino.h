/* Just enough of the Arduino API to run rigmon_rm1.ino on the host (rigmon's tests).
 *
 * Serial is an AVR HardwareSerial: a 64-byte transmit ring (availableForWrite() at most 63)
 * that the UART drains SERIAL_DRAIN_PER_LOOP bytes per loop(); what it sent is kept for the
 * test. millis() advances one millisecond per loop() (the driver's main does it).
 */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SERIAL_TX_BUFFER_SIZE
#define SERIAL_TX_BUFFER_SIZE 64
#endif

extern uint32_t host_millis;
static inline uint32_t millis(void) { return host_millis; }

class HostSerial {
  public:
    uint8_t ring[SERIAL_TX_BUFFER_SIZE];
    size_t used = 0;
    char sent[1 << 20];
    size_t sent_len = 0;
    const char *input = "";
    void begin(unsigned long) {}
    int availableForWrite() { return (int)(SERIAL_TX_BUFFER_SIZE - 1 - used); }
    int available() { return (int)strlen(input); }
    int read() { return *input ? *input++ : -1; }
    size_t write(const uint8_t *data, size_t len) {
        /* Like HardwareSerial: waits (here: drains) while the ring is full. */
        for (size_t k = 0; k < len; k++) {
            if (used == SERIAL_TX_BUFFER_SIZE - 1) drain(1);
            ring[used++] = data[k];
        }
        return len;
    }
    void drain(size_t bytes) {
        size_t n = bytes < used ? bytes : used;
        if (sent_len + n < sizeof sent) memcpy(sent + sent_len, ring, n), sent_len += n;
        memmove(ring, ring + n, used - n);
        used -= n;
    }
};
extern HostSerial Serial;

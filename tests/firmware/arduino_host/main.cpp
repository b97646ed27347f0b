/* Runs rigmon_rm1.ino's setup() and loop() on the host; prints what its Serial sent.
 * argv[1]: loops to run (one millisecond each); argv[2]: bytes the UART sends per loop;
 * argv[3], argv[4]: the host reads nothing from that millisecond until before this one;
 * argv[5]: the millisecond the under-voltage alert latches. */
#include <stdio.h>

#include "Arduino.h"
#include "Wire.h"

uint32_t host_millis = 0;
HostSerial Serial;
HostWire Wire;

#include "rigmon_rm1.ino"

int main(int argc, char **argv) {
    long loops = argc > 1 ? atol(argv[1]) : 3000;
    size_t drain = argc > 2 ? (size_t)atol(argv[2]) : 11; /* 115200 baud: ~11.5 bytes a ms */
    uint32_t stall_from = argc > 4 ? (uint32_t)atol(argv[3]) : 0, stall_to = argc > 4 ? (uint32_t)atol(argv[4]) : 0;
    Wire.alert_at_ms = argc > 5 ? (uint32_t)atol(argv[5]) : 0;
    setup();
    for (long k = 0; k < loops; k++) {
        host_millis++;
        loop();
        if (host_millis < stall_from || host_millis >= stall_to) Serial.drain(drain);
    }
    Serial.drain(SERIAL_TX_BUFFER_SIZE);
    fwrite(Serial.sent, 1, Serial.sent_len, stdout);
    return 0;
}

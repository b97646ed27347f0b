/* Runs rigmon_rm1.ino's setup() and loop() on the host; prints what its Serial sent.
 * argv[1]: loops to run (one millisecond each); argv[2]: bytes the UART sends per loop. */
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
    setup();
    for (long k = 0; k < loops; k++) {
        host_millis++;
        loop();
        Serial.drain(drain);
    }
    Serial.drain(SERIAL_TX_BUFFER_SIZE);
    fwrite(Serial.sent, 1, Serial.sent_len, stdout);
    return 0;
}

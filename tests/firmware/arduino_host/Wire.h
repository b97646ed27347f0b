/* A host stand-in for the Arduino Wire (I2C) library with INA226s that always have a fresh
 * conversion: 12.000 V on the bus (9600 x 1.25 mV), 40 A through the 375 uOhm shunt; the load
 * INA226's under-voltage alert (Mask/Enable AFF) latches at `alert_at_ms`. */
#pragma once
#include <stdint.h>

extern uint32_t host_millis;

class HostWire {
  public:
    /* The millisecond at which the INA226's bus under-voltage alert latches once (0: never). */
    uint32_t alert_at_ms = 0;
    uint8_t reg = 0;
    int left = 0;
    uint16_t value = 0;
    void begin() {}
    void setClock(uint32_t) {}
    void beginTransmission(uint8_t) { left = -1; }
    size_t write(uint8_t b) {
        if (left == -1) reg = b, left = 0;
        return 1;
    }
    uint8_t endTransmission(bool = true) { return 0; }
    uint8_t requestFrom(int, int count) {
        value = reg == 0x06 ? (host_millis == alert_at_ms ? 0x0018 : 0x0008)
                : reg == 0x02 ? 9600 : reg == 0x01 ? 6000 : 0;
        left = count;
        return (uint8_t)count;
    }
    int read() { return left-- == 2 ? value >> 8 : value & 0xFF; }
};
extern HostWire Wire;

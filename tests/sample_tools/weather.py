from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field

from toolroute import function_tool, mcp_service, mcp_tool


class Unit(str, Enum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Location(BaseModel):
    city: str = Field(description="City name")
    country: str = Field("NL", description="ISO country code")


class WeatherRequest(BaseModel):
    """Ask for the weather."""

    location: Location = Field(description="Where")
    unit: Unit = Field(Unit.celsius, description="Temperature unit")
    days: int = Field(1, ge=1, le=7, description="Forecast length")


@function_tool(name="get_weather", read_only=True, idempotent=True)
class GetWeather:
    """Current weather for a location."""

    def apply(self, request: WeatherRequest) -> dict[str, object]:
        return {"city": request.location.city, "unit": request.unit.value, "days": request.days, "temp": 21}


@mcp_service("forecast service")
class ForecastService:
    """Forecasts."""

    @mcp_tool(description="Rain chance in percent")
    def rain(self, city: str, days: int = 1) -> dict[str, object]:
        return {"city": city, "days": days, "chance": 40}

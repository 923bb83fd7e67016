"""SMS and MMS through Twilio as hermes knows it: a message body is at most 1,600
characters (Twilio bills it in segments of 153 GSM-7 or 67 UCS-2 characters), text as it
is; a long-code number sends one message a second (Twilio queues what comes faster);
deliveries come by webhook; files go out as MMS media Twilio fetches from hermes, at most
5 MB a message."""

from hermes.adapters.platform import Limit, Pace, Platform
from hermes.adapters.sms.config import SmsConfig

MAX_MEDIA = 5 * 1024 * 1024  # Twilio's limit for a message's media, all of it

SMS = Platform(
    "sms",
    Limit(1600, "utf16"),  # counted as Twilio may: an emoji is two
    "hermes.adapters.sms.adapter:SmsAdapter",
    # A US long code's default: 1 message segment a second (toll-free and 10DLC differ);
    # Twilio queues a burst and sends it at that rate.
    pace=Pace(1.0, 1.0, burst=10, chat_burst=3),
    secret_variables=("TWILIO_*", "SMS_*"),  # `hermes setup` writes SMS_TOKEN
    token_hint="the account's Auth Token (Twilio Console > Account Info)",
    settings=SmsConfig,
    webhook=True,
    max_upload=MAX_MEDIA,
    asks=("account_sid", "number", "public_url", "token_env"),
)
